"""Tool specs for the engine's grammar tests, written as their argument properties."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent.messages import FunctionSpec, ToolSpec


def object_tool(
    name: str, properties: dict[str, Any], required: Sequence[str], description: str = ""
) -> ToolSpec:
    """A tool whose arguments are one JSON object of ``properties``, ``required`` among them."""
    parameters = {"type": "object", "properties": properties, "required": list(required)}
    return ToolSpec(
        function=FunctionSpec(name=name, description=description, parameters=parameters)
    )
