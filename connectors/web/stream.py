"""The loop's events as the page receives them: small JSON objects in server-sent event frames.

Only what the page shows is sent; the page builds its elements from these with ``textContent``,
so nothing the model or a tool wrote is ever read as HTML.
"""

from __future__ import annotations

import json
from typing import Any

from agent.events import (
    ApprovalRequested,
    ApprovalResolved,
    ErrorEvent,
    Event,
    FinalEvent,
    TokenEvent,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
)


def pretty_arguments(raw: str) -> str:
    """A call's arguments, indented when they are JSON, as they are otherwise."""
    try:
        return json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        return raw


def browser_event(event: Event, stopped: bool) -> dict[str, Any] | None:
    """What the page is told of ``event`` (None: nothing); ``stopped``: the person pressed Stop."""
    if isinstance(event, TokenEvent):
        return {"type": "token", "text": event.text}
    if isinstance(event, ToolCallEvent):
        fn = event.call.function
        return {
            "type": "tool_call",
            "id": event.call.id,
            "name": fn.name,
            "arguments": pretty_arguments(fn.arguments),
        }
    if isinstance(event, ApprovalRequested):
        fn = event.call.function
        return {
            "type": "approval",
            "id": event.id,
            "call_id": event.call.id,
            "name": fn.name,
            "arguments": pretty_arguments(fn.arguments),
            "summary": event.summary,
            "reason": event.reason,
            "suggestion": event.suggestion,
            "person_only": event.person_only,
            "expires_in_s": event.expires_in_s,
        }
    if isinstance(event, ApprovalResolved):
        return {
            "type": "approval_resolved",
            "id": event.id,
            "outcome": event.outcome,
            "by": event.by,
        }
    if isinstance(event, ToolResultEvent):
        return {
            "type": "tool_result",
            "call_id": event.call_id,
            "name": event.name,
            "ok": event.ok,
            "content": event.content,
            "seconds": round(event.seconds, 2),
            "decision": event.decision,
            "decided_by": event.decided_by,
        }
    if isinstance(event, FinalEvent):
        return {"type": "final", "content": event.content}
    if isinstance(event, ErrorEvent):
        if stopped and event.reason == "aborted":
            return {"type": "stopped", "message": "stopped."}
        return {"type": "error", "message": event.message, "reason": event.reason}
    if isinstance(event, UsageEvent):
        return {
            "type": "usage",
            "steps": event.steps,
            "prompt_tokens": event.prompt_tokens,
            "completion_tokens": event.completion_tokens,
            "cached_tokens": event.cached_tokens,
            "seconds": round(event.seconds, 2),
        }
    return None  # steps and compaction notes are for the trace, not the chat


def sse(data: dict[str, Any]) -> bytes:
    """One server-sent event frame; the JSON has no raw newlines, so one ``data:`` line."""
    return f"event: {data['type']}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
