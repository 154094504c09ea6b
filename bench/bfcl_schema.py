"""BFCL function documents as clawloop tools: the conversion BFCL applies for OpenAI models.

BFCL describes functions with Python-flavoured types ("dict", "float", "tuple", "any"). For a
function-calling model it converts them to JSON Schema with ``convert_to_tool`` and
``_cast_to_openai_type`` (``bfcl_eval/model_handler/utils.py``, bfcl-eval 2026.3.23) using the
``GORILLA_TO_OPENAPI`` table (``bfcl_eval/constants/type_mappings.py``), in the OpenAI
completions style: a "." in a function name becomes "_" (OpenAI's name pattern has no dots;
the checker maps the expected name the same way). Before that, every description gets BFCL's
language hint (``_func_doc_language_specific_pre_processing`` in ``bfcl_eval/utils.py``).
This file ports those steps for Python functions; the package itself imports every
provider's SDK, so it is not imported here.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from agent.messages import FunctionSpec, ToolSpec

# bfcl_eval/constants/type_mappings.py: GORILLA_TO_OPENAPI (the entries Python functions use,
# and the Java/JavaScript ones, since the table is shared).
GORILLA_TO_OPENAPI = {
    "integer": "integer",
    "number": "number",
    "float": "number",
    "string": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "dict": "object",
    "object": "object",
    "tuple": "array",
    "any": "string",
    "byte": "integer",
    "short": "integer",
    "long": "integer",
    "double": "number",
    "char": "string",
    "ArrayList": "array",
    "Array": "array",
    "HashMap": "object",
    "Hashtable": "object",
    "Queue": "array",
    "Stack": "array",
    "Any": "string",
    "String": "string",
    "Bigint": "integer",
}
PYTHON_HINT = " Note that the provided function is in Python 3 syntax."


def openai_name(name: str) -> str:
    """A BFCL function name as an OpenAI-style tool name ("math.hypot" -> "math_hypot")."""
    return re.sub(r"\.", "_", name)


def with_python_hint(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The functions with BFCL's Python hint appended to each description."""
    hinted = copy.deepcopy(functions)
    for item in hinted:
        item["description"] = item.get("description", "") + PYTHON_HINT
    return hinted


def to_json_schema_function(function: dict[str, Any]) -> dict[str, Any]:
    """One BFCL function as an OpenAI function (name, description, JSON Schema parameters)."""
    item = copy.deepcopy(function)
    item["name"] = openai_name(item["name"])
    item["parameters"]["type"] = "object"
    item["parameters"]["properties"] = _cast_to_openai_type(item["parameters"]["properties"])
    return item


def to_tool_specs(functions: list[dict[str, Any]]) -> list[ToolSpec]:
    """BFCL functions as the clawloop tools a request offers (with BFCL's Python hint)."""
    specs = []
    for function in with_python_hint(functions):
        item = to_json_schema_function(function)
        specs.append(
            ToolSpec(
                function=FunctionSpec(
                    name=item["name"],
                    description=item.get("description", ""),
                    parameters=item["parameters"],
                )
            )
        )
    return specs


def _cast_to_openai_type(properties: dict[str, Any]) -> dict[str, Any]:
    """BFCL's ``_cast_to_openai_type`` with the GORILLA_TO_OPENAPI mapping, kept step for step.

    It supports what BFCL supports: lists of any, lists of lists, lists of dicts, and dicts
    with properties.
    """
    mapping = GORILLA_TO_OPENAPI
    for key, value in properties.items():
        if "type" not in value:
            properties[key]["type"] = "string"
        else:
            var_type = value["type"]
            if var_type == "float":
                properties[key]["format"] = "float"
                properties[key]["description"] = (
                    properties[key].get("description", "") + " This is a float type value."
                )
            properties[key]["type"] = mapping.get(var_type, "string")

        prop = properties[key]
        if prop["type"] in ("array", "object"):
            if "properties" in prop:
                prop["properties"] = _cast_to_openai_type(prop["properties"])
            elif "items" in prop:
                items = prop["items"]
                items["type"] = mapping[items["type"]]
                if items["type"] == "array" and "items" in items:
                    items["items"]["type"] = mapping[items["items"]["type"]]
                elif items["type"] == "object" and "properties" in items:
                    items["properties"] = _cast_to_openai_type(items["properties"])
    return properties
