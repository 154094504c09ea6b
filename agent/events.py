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


@dataclass(slots=True)
class ApprovalRequested:
    """A call waits for a person: answer it with ``context.approvals.answer(id, ...)``.

    The call has not started; its timeout starts only once it is approved. Unanswered for
    ``expires_in_s`` seconds, it is refused and the model is told so.
    """

    id: str
    call: ToolCall
    rule: str  # the rule that matched ("" when none did and the default asks)
    reason: str  # why it is asked, for people
    suggestion: str  # the allow rule an "always" answer saves
    summary: str  # the call as one line, secrets redacted
    expires_in_s: float
    run_id: str = ""
    type: str = "approval_requested"


@dataclass(slots=True)
class ApprovalResolved:
    """How an ask ended: "once", "always", "deny", "expired" or "cancelled", and by whom."""

    id: str
    outcome: str
    by: str
    run_id: str = ""
    type: str = "approval_resolved"


Event = (
    TokenEvent
    | ToolCallEvent
    | ToolResultEvent
    | FinalEvent
    | ErrorEvent
    | UsageEvent
    | ApprovalRequested
    | ApprovalResolved
)


def event_to_json(event: Event) -> dict[str, Any]:
    """A JSON-ready dict for one event, with ``type`` first."""
    data = asdict(event)
    if isinstance(event, ToolCallEvent | ApprovalRequested):
        data["call"] = event.call.to_wire()
    return {"type": data.pop("type"), **data}
