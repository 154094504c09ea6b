"""The tool protocol, and tools made from plain typed Python functions.

A skill author writes a typed function with a docstring; :func:`function_tool` derives the JSON
schema with pydantic and validates arguments before the call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import ValidationError, create_model

from agent.errors import ToolError
from agent.messages import FunctionSpec, ToolSpec


@runtime_checkable
class Tool(Protocol):
    """A named action the model can call with JSON arguments."""

    name: str
    description: str
    parameters: dict[str, Any]

    def call(self, arguments: dict[str, Any]) -> str:
        """Run the tool; raise :class:`ToolError` with a message for the model on failure."""
        ...


def tool_spec(tool: Tool) -> ToolSpec:
    """The request-side definition of a tool."""
    return ToolSpec(
        function=FunctionSpec(
            name=tool.name, description=tool.description, parameters=tool.parameters
        )
    )


@dataclass(slots=True)
class FunctionTool:
    """A tool backed by a typed Python function."""

    name: str
    description: str
    parameters: dict[str, Any]
    func: Callable[..., Any]
    model: Any = field(repr=False)
    source: str = "builtin"

    def call(self, arguments: dict[str, Any]) -> str:
        try:
            validated = self.model.model_validate(arguments)
        except ValidationError as exc:
            raise ToolError(f"invalid arguments for {self.name}: {_short_errors(exc)}") from exc
        kwargs = {name: getattr(validated, name) for name in self.model.model_fields}
        result = self.func(**kwargs)
        return result if isinstance(result, str) else str(result)


def function_tool(
    func: Callable[..., Any], name: str | None = None, source: str = "builtin"
) -> FunctionTool:
    """Make a tool from a typed function; its docstring's first paragraph is the description.

    Parameters may carry ``Annotated[..., Field(description=...)]`` for per-argument help.
    """
    sig = inspect.signature(func)
    hints = inspect.get_annotations(func, eval_str=True)
    fields: dict[str, Any] = {}
    for pname, param in sig.parameters.items():
        if pname not in hints:
            raise TypeError(f"tool function {func.__name__}: parameter {pname!r} needs a type")
        default: Any = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (hints[pname], default)
    tool_name = name or func.__name__
    model = create_model(f"{tool_name}_args", **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    doc = inspect.getdoc(func) or ""
    description = doc.split("\n\n")[0].replace("\n", " ").strip()
    return FunctionTool(tool_name, description, schema, func, model, source)


def _short_errors(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


Refine = Callable[[list[ToolSpec]], list[ToolSpec]]


class Toolbox:
    """The tools one agent may call, by name.

    ``refine`` rewrites the tool definitions before each request (for example, to offer a path
    argument as an enum of the files that exist right now).
    """

    def __init__(self, tools: Iterable[Tool] = (), refine: Refine | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        self.refine = refine
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"two tools are named {tool.name!r}")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def specs(self) -> list[ToolSpec]:
        """The tools' definitions as a request offers them."""
        specs = [tool_spec(t) for t in self._tools.values()]
        return self.refine(specs) if self.refine is not None else specs

    def as_mapping(self) -> Mapping[str, Tool]:
        return dict(self._tools)
