"""Graded traces to training data: one conversation per line, in the OpenAI chat fine-tuning
format (``{"messages": [...], "tools": [...]}``), deduplicated and validated."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from agent.errors import UserError
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


def messages_of(trace: Trace) -> tuple[list[dict[str, Any]], bool]:
    """The trace's conversation as wire messages, and whether the run gave a final answer."""
    messages: list[dict[str, Any]] = list(trace.start.get("messages") or [])
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
    return messages, answered


def conversation(trace: Trace) -> dict[str, Any] | None:
    """The trace's conversation as a fine-tuning example, or None if it has no final answer."""
    messages, answered = messages_of(trace)
    if not answered or not messages or messages[-1].get("role") != "assistant":
        return None
    example: dict[str, Any] = {"messages": messages}
    if trace.start.get("tools"):
        example["tools"] = trace.start["tools"]
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


def since_time(text: str) -> str:
    """The ISO time a ``--since`` value names: a date or time (``2026-05-01``,
    ``2026-05-01T12:00``) or an age (``90m``, ``12h``, ``3d``); a UserError otherwise."""
    age = re.fullmatch(r"(\d+)\s*([mhd])", text.strip())
    if age:
        seconds = int(age[1]) * {"m": 60, "h": 3600, "d": 86400}[age[2]]
        moment = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=seconds)
    else:
        try:
            moment = dt.datetime.fromisoformat(text.strip())
        except ValueError:
            raise UserError(
                f"--since {text!r} is neither a date nor an age: "
                "give 2026-05-01, 2026-05-01T12:00 or 3d, 12h, 90m"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.UTC)  # trace times are UTC
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")


def select(
    traces: Iterable[Trace], families: Iterable[str] | None = None, since: str | None = None
) -> list[Trace]:
    """The traces of these task families (as their first line records), started at or after
    the ISO time ``since`` (from :func:`since_time`)."""
    wanted = set(families or ())
    chosen = []
    for trace in traces:
        start = trace.start
        if wanted and start.get("family") not in wanted:
            continue
        if since is not None and str(start.get("time", ""))[:19] < since:
            continue
        chosen.append(trace)
    return chosen


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
        # Keys keep their order: the chat template renders tool schemas as written, so a
        # sorted line would train on prompts the model is never shown. Duplicates are found
        # whatever the order.
        line = json.dumps(example, ensure_ascii=False)
        canonical = json.dumps(example, ensure_ascii=False, sort_keys=True)
        digest = hashlib.sha256(canonical.encode()).hexdigest()
        if digest in seen:
            summary.skipped["duplicate"] += 1
            continue
        seen.add(digest)
        lines.append(line)
        summary.written += 1
    return lines, summary
