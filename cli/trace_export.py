"""Graded traces to training data: one conversation per line, in the OpenAI chat fine-tuning
format (``{"messages": [...], "tools": [...]}``), deduplicated and validated."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from agent.messages import parse_message
from agent.trace import Trace


@dataclass(slots=True)
class ExportSummary:
    """What an export included and why the rest was skipped."""

    written: int = 0
    skipped: Counter[str] = field(default_factory=Counter)

    def describe(self) -> str:
        parts = [f"{n} {why}" for why, n in sorted(self.skipped.items())]
        skipped = f"; skipped {', '.join(parts)}" if parts else "; skipped none"
        return f"wrote {self.written} conversations{skipped}"


def conversation(trace: Trace) -> dict[str, Any] | None:
    """The trace's conversation as a fine-tuning example, or None if it has no final answer."""
    start = trace.start
    messages: list[dict[str, Any]] = list(start.get("messages") or [])
    answered = False
    for record in trace.records:
        kind = record.get("type")
        if kind == "step":
            messages.append(record["message"])
        elif kind == "tool_result":
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": record["call_id"],
                    "name": record["name"],
                    "content": record["content"],
                }
            )
        elif kind == "final":
            answered = True
    if not answered or not messages or messages[-1].get("role") != "assistant":
        return None
    example: dict[str, Any] = {"messages": messages}
    if start.get("tools"):
        example["tools"] = start["tools"]
    return example


def problem(example: dict[str, Any]) -> str | None:
    """Why ``example`` is not a valid chat fine-tuning line, or None."""
    try:
        messages = [parse_message(m) for m in example["messages"]]
    except (ValidationError, KeyError, TypeError, ValueError):
        return "invalid message"
    if not any(m.role == "user" for m in messages):
        return "no user message"
    open_calls: set[str] = set()
    for m in messages:
        calls = getattr(m, "tool_calls", None) or []
        if m.role == "tool":
            call_id = getattr(m, "tool_call_id", "")
            if call_id not in open_calls:
                return "tool result without its call"
            open_calls.discard(call_id)
        elif open_calls:
            return "tool call without its result"
        open_calls |= {c.id for c in calls}
    return None


def export(traces: Iterable[Trace], grade: str = "good") -> tuple[list[str], ExportSummary]:
    """The JSONL lines for every trace graded ``grade``, and what was skipped."""
    summary = ExportSummary()
    seen: set[str] = set()
    lines: list[str] = []
    for trace in traces:
        if trace.grade is None:
            summary.skipped["ungraded"] += 1
            continue
        if trace.grade != grade:
            summary.skipped[f"graded {trace.grade}"] += 1
            continue
        example = conversation(trace)
        if example is None:
            summary.skipped["without a final answer"] += 1
            continue
        if (why := problem(example)) is not None:
            summary.skipped[why] += 1
            continue
        line = json.dumps(example, ensure_ascii=False, sort_keys=True)
        digest = hashlib.sha256(line.encode()).hexdigest()
        if digest in seen:
            summary.skipped["duplicate"] += 1
            continue
        seen.add(digest)
        lines.append(line)
        summary.written += 1
    return lines, summary
