"""What the loop reports as it runs; the CLI, the connectors and the traces all consume these.

Every event carries the id of the run and the step (model call) it belongs to; they are left out
of equality, so two events say the same thing whichever run they came from.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from agent.messages import AssistantMessage, ToolCall
from agent.provenance import Provenance


@dataclass(slots=True)
class TokenEvent:
    """Generated text, streamed as it is decoded."""

    text: str
    type: str = "token"
    run_id: str = field(default="", compare=False)
    step: int = field(default=0, compare=False)


@dataclass(slots=True)
class ToolCallEvent:
    """The model asked for a tool."""

    call: ToolCall
    type: str = "tool_call"
    run_id: str = field(default="", compare=False)
    step: int = field(default=0, compare=False)


@dataclass(slots=True)
class ToolResultEvent:
    """A tool call's observation, as sent back to the model."""

    call_id: str
    name: str
    content: str
    ok: bool
    seconds: float = 0.0
    type: str = "tool_result"
    decision: str | None = None  # "allow", "deny", "invalid" (never reached the policy)
    decided_by: str | None = None  # the rule, person or check that decided
    provenance: Provenance | None = None  # where the content came from (see agent/provenance)
    run_id: str = field(default="", compare=False)
    step: int = field(default=0, compare=False)


@dataclass(slots=True)
class FinalEvent:
    """The model answered without calling a tool: the run is done."""

    content: str
    type: str = "final"
    run_id: str = field(default="", compare=False)
    step: int = field(default=0, compare=False)


@dataclass(slots=True)
class ErrorEvent:
    """The run stopped without a final answer (step limit, time budget, backend failure)."""

    message: str
    # "max_steps", "time_budget", "backend", "aborted", "length", "budget", and the loop
    # guards' "repeated_call", "repeated_error", "alternating_calls"
    reason: str
    type: str = "error"
    run_id: str = field(default="", compare=False)
    step: int = field(default=0, compare=False)


@dataclass(slots=True)
class UsageEvent:
    """Totals for the run, sent once at the end."""

    steps: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    seconds: float
    type: str = "usage"
    run_id: str = field(default="", compare=False)
    step: int = field(default=0, compare=False)


@dataclass(slots=True)
class CompactedEvent:
    """Older turns were replaced by a summary in what the model is sent (see compaction)."""

    covered: int  # messages the summary now covers
    method: str  # "extractive" or "model"
    tokens_before: int  # the request's estimated size before
    tokens_after: int  # and after
    type: str = "compacted"
    run_id: str = field(default="", compare=False)
    step: int = field(default=0, compare=False)


@dataclass(slots=True)
class StepEvent:
    """One model call, as it was sent and as it came back: what traces are made of."""

    messages: int  # how many messages the request held
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    finish_reason: str
    message: AssistantMessage
    raw_text: str | None = None
    parse_error: str | None = None
    ttft_s: float | None = None
    tokens_per_s: float | None = None
    seconds: float = 0.0
    # The tools the request showed (wire form), when they differ from the run's previous step:
    # tool selection and the workspace's file names change them, and training from a trace
    # must show the model what it was shown.
    tools: list[dict[str, Any]] | None = None
    type: str = "step"
    run_id: str = field(default="", compare=False)
    step: int = field(default=0, compare=False)


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
    person_only: bool = False  # a data-flow ask: no standing answer (--yes) may approve it
    type: str = "approval_requested"
    run_id: str = field(default="", compare=False)
    step: int = field(default=0, compare=False)


@dataclass(slots=True)
class ApprovalResolved:
    """How an ask ended: "once", "always", "deny", "expired" or "cancelled", and by whom."""

    id: str
    outcome: str
    by: str
    type: str = "approval_resolved"
    run_id: str = field(default="", compare=False)
    step: int = field(default=0, compare=False)


Event = (
    TokenEvent
    | ToolCallEvent
    | ToolResultEvent
    | FinalEvent
    | ErrorEvent
    | UsageEvent
    | StepEvent
    | CompactedEvent
    | ApprovalRequested
    | ApprovalResolved
)


def event_to_json(event: Event) -> dict[str, Any]:
    """A JSON-ready dict for one event, with ``type`` first."""
    data = asdict(event)
    if isinstance(event, ToolCallEvent | ApprovalRequested):
        data["call"] = event.call.to_wire()
    if isinstance(event, StepEvent):
        data["message"] = event.message.to_wire()
    if isinstance(event, ToolResultEvent):
        data["provenance"] = None if event.provenance is None else event.provenance.model_dump()
    return {"type": data.pop("type"), **data}
