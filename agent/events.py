"""What the loop reports as it runs; the CLI, the connectors and the traces all consume these."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from agent.messages import ToolCall


@dataclass(slots=True)
class TokenEvent:
    """Generated text, streamed as it is decoded."""

    text: str
    type: str = "token"


@dataclass(slots=True)
class ToolCallEvent:
    """The model asked for a tool."""

    call: ToolCall
    type: str = "tool_call"


@dataclass(slots=True)
class ToolResultEvent:
    """A tool call's observation, as sent back to the model."""

    call_id: str
    name: str
    content: str
    ok: bool
    seconds: float = 0.0
    type: str = "tool_result"


@dataclass(slots=True)
class FinalEvent:
    """The model answered without calling a tool: the run is done."""

    content: str
    type: str = "final"


@dataclass(slots=True)
class ErrorEvent:
    """The run stopped without a final answer (step limit, time budget, backend failure)."""

    message: str
    reason: str  # "max_steps", "time_budget", "backend", "aborted"
    type: str = "error"


@dataclass(slots=True)
class UsageEvent:
    """Totals for the run, sent once at the end."""

    steps: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    seconds: float
    type: str = "usage"


Event = TokenEvent | ToolCallEvent | ToolResultEvent | FinalEvent | ErrorEvent | UsageEvent


def event_to_json(event: Event) -> dict[str, Any]:
    """A JSON-ready dict for one event, with ``type`` first."""
    data = asdict(event)
    if isinstance(event, ToolCallEvent):
        data["call"] = event.call.to_wire()
    return {"type": data.pop("type"), **data}
