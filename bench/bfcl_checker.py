"""BFCL's AST checker for the ``simple_python``, ``multiple`` and ``irrelevance`` categories.

A port, for Python functions, of ``bfcl_eval/eval_checker/ast_eval/ast_checker.py`` and of the
decoding and relevance rules in ``bfcl_eval/eval_checker/eval_runner.py`` and
``bfcl_eval/utils.py`` (bfcl-eval 2026.3.23, Apache 2.0). The package cannot be imported
without every provider's SDK (its checker imports the whole model table), so the logic is
copied here step for step, quirks included: exact type matches (``True`` is no integer), an
integer accepted where a float is expected, strings compared without case, spaces and
``,./-_*^``, and "" in a parameter's answers marking it optional. Function names follow
BFCL's OpenAI style (``underscore_to_dot``): the expected "math.hypot" is looked for as
"math_hypot", the name the tool was offered under.

A model's output is a list of calls ``[{name: arguments-json-text}]``, as BFCL records an
OpenAI function-calling model's tool calls; :func:`decode_calls` turns it into
``[{name: {param: value}}]`` as the OpenAI handler's ``decode_ast`` does.
"""

from __future__ import annotations

import json
import re
from typing import Any, cast

from bench.bfcl_schema import openai_name

Result = dict[str, Any]

# ast_checker.py: PYTHON_TYPE_MAPPING and PYTHON_NESTED_TYPE_CHECK_LIST
PYTHON_TYPE_MAPPING: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
PYTHON_NESTED_TYPE_CHECK_LIST = ["array", "tuple"]


def decode_calls(calls: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """``[{name: params}]`` from ``(name, arguments JSON)`` pairs; raises on unreadable JSON.

    This is the OpenAI handler's ``decode_ast`` (``openai_completion.py``) for FC models.
    """
    return [{name: json.loads(arguments)} for name, arguments in calls]


def is_function_calling_format_output(decoded: Any) -> bool:
    """``utils.is_function_calling_format_output``: a list of ``{name: dict}`` (``[]`` too)."""
    if type(decoded) is not list:
        return False
    for item in decoded:
        if type(item) is not dict or len(item) != 1:
            return False
        if type(next(iter(item.values()))) is not dict:
            return False
    return True


def is_empty_output(decoded: Any) -> bool:
    """``utils.is_empty_output``: no function call (``[]``, ``[{}]`` or not a call list)."""
    if not is_function_calling_format_output(decoded):
        return True
    return len(decoded) == 0 or (len(decoded) == 1 and len(decoded[0]) == 0)


def check_irrelevance(calls: list[tuple[str, str]]) -> Result:
    """``_evaluate_single_relevance_entry`` for ``irrelevance``: right when no call decodes."""
    try:
        decoded = decode_calls(calls)
    except (json.JSONDecodeError, TypeError):
        return {"valid": True, "error": []}  # not a function call in BFCL's eyes
    if is_empty_output(decoded):
        return {"valid": True, "error": []}
    return {
        "valid": False,
        "error": ["Valid syntax. Successfully decode AST when it should not."],
        "error_type": "irrelevance_error:decoder_success",
    }


def check_ast(
    functions: list[dict[str, Any]],
    calls: list[tuple[str, str]],
    possible_answer: list[dict[str, Any]],
    category: str,
) -> Result:
    """``_evaluate_single_ast_entry`` then ``ast_checker`` for a Python category."""
    try:
        decoded = decode_calls(calls)
    except (json.JSONDecodeError, TypeError) as exc:
        return {
            "valid": False,
            "error": [f"Invalid syntax. Failed to decode AST. {exc}"],
            "error_type": "ast_decoder:decoder_failed",
        }
    if not is_function_calling_format_output(decoded):
        return {
            "valid": False,
            "error": ["Did not output in the specified format."],
            "error_type": "ast_decoder:decoder_wrong_output_format",
        }
    return ast_checker(functions, decoded, possible_answer, category)


def ast_checker(
    functions: list[dict[str, Any]],
    output: list[dict[str, Any]],
    possible_answer: list[dict[str, Any]],
    category: str,
) -> Result:
    """``ast_checker`` for the simple and multiple categories (parallel ones are not ported)."""
    if "parallel" in category:
        raise ValueError(f"the parallel categories are not ported: {category}")
    if "multiple" in category:
        return multiple_function_checker(functions, output, possible_answer)
    if len(output) != 1:
        return {
            "valid": False,
            "error": ["Wrong number of functions."],
            "error_type": "simple_function_checker:wrong_count",
        }
    return simple_function_checker(functions[0], output[0], possible_answer[0])


def multiple_function_checker(
    functions: list[dict[str, Any]],
    output: list[dict[str, Any]],
    possible_answers: list[dict[str, Any]],
) -> Result:
    """One call to the one expected function among several offered."""
    if len(output) != len(possible_answers):
        return {
            "valid": False,
            "error": ["Wrong number of functions."],
            "error_type": "multiple_function_checker:wrong_count",
        }
    expected = next(iter(possible_answers[0]))
    description = find_description(functions, expected)
    return simple_function_checker(description, output[0], possible_answers[0])


def find_description(functions: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The function document named ``name``."""
    for function in functions:
        if function["name"] == name:
            return function
    raise ValueError(f"no function {name!r} in the case's functions")


def simple_function_checker(
    function: dict[str, Any], output: dict[str, Any], possible_answer: dict[str, Any]
) -> Result:
    """One call against one function's possible answers (``simple_function_checker``)."""
    answers: dict[str, list[Any]] = next(iter(possible_answer.values()))
    param_details = function["parameters"]["properties"]
    required_params = function["parameters"]["required"]
    func_name = openai_name(function["name"])
    if func_name not in output:
        return _fail(
            f"Function name {func_name!r} not found in model output.",
            "simple_function_checker:wrong_func_name",
        )
    model_params = output[func_name]
    for param in required_params:
        if param not in model_params:
            return _fail(
                f"Missing required parameter: {param!r}.",
                "simple_function_checker:missing_required",
            )
    for param, raw_value in model_params.items():
        if param not in param_details or param not in answers:
            return _fail(
                f"Unexpected parameter: {param!r}.", "simple_function_checker:unexpected_param"
            )
        result = _check_param(param, raw_value, param_details[param], answers[param])
        if not result["valid"]:
            return result
    for param in answers:
        if param not in model_params and "" not in answers[param]:
            return _fail(
                f"Optional parameter {param!r} not provided and not marked as optional.",
                "simple_function_checker:missing_optional",
            )
    return {"valid": True, "error": []}


def _check_param(param: str, value: Any, details: dict[str, Any], answers: list[Any]) -> Result:
    """The type and value checks of one parameter (the loop body of ``simple_function_checker``)."""
    type_description = details["type"]
    expected_type = PYTHON_TYPE_MAPPING[type_description]
    nested_type = None
    if type_description in PYTHON_NESTED_TYPE_CHECK_LIST:
        nested_type = PYTHON_TYPE_MAPPING[details["items"]["type"]]
    if type_description == "tuple" and type(value) is tuple:
        value = list(value)
    if type_description == "float" and type(value) is int:
        value = float(value)  # Python's own int-to-float promotion
    typed = type_checker(param, value, answers, type_description, expected_type, nested_type)
    if not typed["valid"]:
        return typed
    if not typed["is_variable"]:
        if expected_type is dict:
            return dict_checker(param, value, answers)
        if expected_type is list and nested_type is dict:
            return list_dict_checker(param, value, answers)
        if expected_type is str:
            return string_checker(param, value, answers)
        if expected_type is list:
            return list_checker(param, value, answers)
    if value not in answers:
        return _fail(
            f"Invalid value for parameter {param!r}: {value!r}. Expected one of {answers}.",
            "value_error:others",
        )
    return {"valid": True, "error": []}


def get_possible_answer_type(possible_answer: list[Any]) -> type | None:
    """The type of the first non-optional answer."""
    for answer in possible_answer:
        if answer != "":
            return type(answer)
    return None


def type_checker(
    param: str,
    value: Any,
    possible_answer: list[Any],
    expected_type_description: str,
    expected_type: type,
    nested_type: type | None,
) -> Result:
    """Exact type match, nested one level for lists; a value typed like the answers is a
    "variable" and is compared as is (``type_checker``)."""
    result: Result = {
        "valid": True,
        "error": [],
        "is_variable": False,
        "error_type": "type_error:simple",
    }
    is_variable = False
    answer_type = get_possible_answer_type(possible_answer)
    if answer_type is not None and answer_type is not expected_type:
        is_variable = True
    if type(value) is expected_type:
        if nested_type is None:
            result["is_variable"] = is_variable
            return result
        for answer_item in possible_answer:
            flag = True
            if type(answer_item) is list:
                for value_item in cast("list[Any]", value):
                    inner = type_checker(
                        param, value_item, answer_item, str(nested_type), nested_type, None
                    )
                    if not inner["valid"]:
                        flag = False
                        break
            if flag:
                return {"valid": True, "error": [], "is_variable": is_variable}
        result["valid"] = False
        result["error"] = [
            f"Nested type checking failed for parameter {param!r}. Expected outer type "
            f"{expected_type_description} with inner type {nested_type}. "
            f"Parameter value: {value!r}."
        ]
        result["error_type"] = "type_error:nested"
    if answer_type is not None and type(value) is answer_type:
        result["is_variable"] = True
        return result
    result["valid"] = False
    result["error"].append(
        f"Incorrect type for parameter {param!r}. Expected type {expected_type_description}, "
        f"got {type(value).__name__}. Parameter value: {value!r}."
    )
    result["error_type"] = "type_error:simple"
    return result


def standardize_string(text: str) -> str:
    """Lower case, without spaces and ``,./-_*^``, single quotes made double."""
    return re.sub(r"[ \,\.\/\-\_\*\^]", "", text).lower().replace("'", '"')


def string_checker(param: str, value: str, possible_answer: list[Any]) -> Result:
    """A string equal to one of the answers after :func:`standardize_string`."""
    standard = [standardize_string(a) for a in possible_answer if type(a) is str]
    if standardize_string(value) not in standard:
        return _fail(
            f"Invalid value for parameter {param!r}: {value!r}. "
            f"Expected one of {possible_answer}. Case insensitive.",
            "value_error:string",
        )
    return {"valid": True, "error": []}


def list_checker(param: str, value: list[Any], possible_answer: list[Any]) -> Result:
    """A list equal to one of the answers, its strings standardized."""
    output = [standardize_string(v) if type(v) is str else v for v in value]
    standard = [
        [standardize_string(v) if type(v) is str else v for v in answer]
        for answer in possible_answer
    ]
    if output not in standard:
        return _fail(
            f"Invalid value for parameter {param!r}: {value!r}. Expected one of {possible_answer}.",
            "value_error:list/tuple",
        )
    return {"valid": True, "error": []}


def dict_checker(param: str, value: dict[str, Any], possible_answers: list[Any]) -> Result:
    """A flat dict matching one of the answer dicts key by key (``dict_checker``)."""
    result: Result = {"valid": False, "error": [], "error_type": "dict_checker:unclear"}
    for possible in possible_answers:
        if possible == "":
            continue
        result = {"valid": False, "error": [], "error_type": "dict_checker:unclear"}
        flag = True
        for key, item in value.items():
            if key not in possible:
                result["error"].append(f"Unexpected dict key parameter: '{key}'.")
                result["error_type"] = "value_error:dict_key"
                flag = False
                break
            standard_value = standardize_string(item) if type(item) is str else item
            standard = [standardize_string(a) if type(a) is str else a for a in possible[key]]
            if standard_value not in standard:
                result["error"].append(
                    f"Invalid value for parameter {key!r}: {item!r}. Expected one of {standard}."
                )
                result["error_type"] = "value_error:dict_value"
                flag = False
                break
        for key, answers in possible.items():
            if key not in value and "" not in answers:
                result["error"].append(f"Missing dict key parameter: '{key}'.")
                result["error_type"] = "value_error:dict_key"
                flag = False
                break
        if flag:
            return {"valid": True, "error": []}
    return result


def list_dict_checker(param: str, value: list[Any], possible_answers: list[Any]) -> Result:
    """A list of dicts matching one answer list, in order (``list_dict_checker``)."""
    result: Result = {"valid": False, "error": [], "error_type": "list_dict_checker:unclear"}
    for answer in possible_answers:
        flag = True
        if len(value) != len(answer):
            result = _fail(
                "Wrong number of dictionaries in the list.", "value_error:list_dict_count"
            )
            continue
        for index, item in enumerate(value):
            result = dict_checker(param, item, [answer[index]])
            if not result["valid"]:
                flag = False
                break
        if flag:
            return {"valid": True, "error": []}
    return result


def _fail(message: str, error_type: str) -> Result:
    return {"valid": False, "error": [message], "error_type": error_type}
