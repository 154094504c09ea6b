"""The JSON schema of one tool call, built from the offered tools.

A call is ``{"name": NAME, "arguments": ARGS}`` where NAME is one of the tools' names and ARGS
is valid for that tool's parameter schema. The tool-call format (:mod:`backends.local.tool_format`)
compiles this schema to its grammars, so that a call, once started, can only be a well-formed
call to a real tool.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from agent.messages import ToolSpec


def tool_call_schema(tools: list[ToolSpec], arguments_key: str = "arguments") -> dict[str, Any]:
    """``anyOf`` over the tools of ``{"name": {"const": NAME}, ARGUMENTS_KEY: PARAMS}``.

    Each tool's ``$defs`` are moved to the top level under ``NAME.DEF`` (with its ``$ref``s
    rewritten), since a ``$ref`` like ``#/$defs/X`` is relative to the document root.
    Arguments that do not say otherwise get ``additionalProperties: false``: a small model
    constrained to the declared keys makes fewer mistakes, and the call stays schema-valid.
    """
    if not tools:
        raise ValueError("a tool-call schema needs at least one tool")
    alternatives: list[dict[str, Any]] = []
    defs: dict[str, Any] = {}
    for tool in tools:
        name = tool.function.name
        params = copy.deepcopy(tool.function.parameters) or {"type": "object"}
        own_defs = params.pop("$defs", None) or params.pop("definitions", None) or {}
        renamed = {old: f"{name}.{old}" for old in own_defs}
        params = _rewrite_refs(params, renamed)
        for old, body in own_defs.items():
            defs[renamed[old]] = _rewrite_refs(body, renamed)
        if params.get("type") == "object" and "additionalProperties" not in params:
            params["additionalProperties"] = False
        alternatives.append(
            {
                "type": "object",
                "properties": {"name": {"const": name}, arguments_key: params},
                "required": ["name", arguments_key],
                "additionalProperties": False,
            }
        )
    schema: dict[str, Any] = alternatives[0] if len(alternatives) == 1 else {"anyOf": alternatives}
    if defs:
        schema = {**schema, "$defs": defs}
    return schema


def tool_call_schema_json(tools: list[ToolSpec], arguments_key: str = "arguments") -> str:
    """:func:`tool_call_schema` as compact JSON text, key order kept (grammars follow it)."""
    return json.dumps(tool_call_schema(tools, arguments_key), separators=(",", ":"))


def _rewrite_refs(node: Any, renamed: dict[str, str]) -> Any:
    if isinstance(node, dict):
        out = {k: _rewrite_refs(v, renamed) for k, v in node.items()}
        ref = out.get("$ref")
        if isinstance(ref, str):
            for prefix in ("#/$defs/", "#/definitions/"):
                if ref.startswith(prefix) and ref[len(prefix) :] in renamed:
                    out["$ref"] = "#/$defs/" + renamed[ref[len(prefix) :]]
        return out
    if isinstance(node, list):
        return [_rewrite_refs(v, renamed) for v in node]
    return node
