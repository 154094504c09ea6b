"""Checks every tool call against the tools offered, whatever backend produced it.

Each problem is returned as text written for the model, so it can correct the call.
"""

from __future__ import annotations

import json
from typing import Any

from agent.messages import ToolCall
from agent.tools import Toolbox


def check_call(call: ToolCall, toolbox: Toolbox) -> tuple[dict[str, Any] | None, str | None]:
    """Return ``(arguments, None)`` for a valid call, or ``(None, message for the model)``."""
    name = call.function.name
    tool = toolbox.get(name)
    if tool is None:
        known = ", ".join(toolbox.names()) or "(none)"
        return None, f"error: there is no tool named {name!r}. Available tools: {known}."
    try:
        args = call.function.parsed_arguments()
    except json.JSONDecodeError as exc:
        return None, (
            f"error: the arguments for {name} are not valid JSON "
            f"({exc.msg} at position {exc.pos}). "
            "Send the arguments as one JSON object."
        )
    if not isinstance(args, dict):
        return (
            None,
            f"error: the arguments for {name} must be a JSON object, not {type(args).__name__}.",
        )
    problems = _schema_problems(args, tool.parameters)
    if problems:
        return None, f"error: invalid arguments for {name}: {problems}. Fix them and call again."
    return args, None


def _schema_problems(args: dict[str, Any], schema: dict[str, Any]) -> str:
    # jsonschema and what it imports take about 50 ms to load: only a run whose model calls a
    # tool needs them.
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        validator = Draft202012Validator(schema)
        errors = sorted(validator.iter_errors(args), key=lambda e: list(e.path))
    except SchemaError:
        return ""  # a broken schema is the tool author's bug; let the tool validate
    parts = []
    for err in errors[:5]:
        where = ".".join(str(p) for p in err.path) or "(arguments)"
        parts.append(f"{where}: {err.message}")
    return "; ".join(parts)
