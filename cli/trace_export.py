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
from agent.messages import AssistantMessage, ChatRequest, ToolMessage, ToolSpec, parse_message
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
    """The trace's conversation as one example with the start's tools, or None if it has no
    final answer (for reading a run; training uses :func:`examples_of`)."""
    messages, answered = messages_of(trace)
    if not answered or not messages or messages[-1].get("role") != "assistant":
        return None
    example: dict[str, Any] = {"messages": messages}
    if trace.start.get("tools"):
        example["tools"] = trace.start["tools"]
    return example


def examples_of(trace: Trace) -> list[dict[str, Any]] | None:
    """The run as fine-tuning examples that show the model what it was shown at each step (the
    prompt's worked examples, the tools that step offered), every turn of the run trained once
    and the session's earlier turns at weight 0; None if the run gave no final answer.

    A trace written before steps recorded their tools gives the start's tools to every step."""
    if conversation(trace) is None:
        return None
    from cli.evals.generators.gold import run_example

    return run_example(_steps(trace))


def _steps(trace: Trace) -> list[tuple[ChatRequest, AssistantMessage]]:
    """Each model call of the run: the request as it was sent, and the turn that came back."""
    history = [parse_message(m) for m in trace.start.get("messages") or []]
    shots = [parse_message(m) for m in trace.start.get("examples") or []]
    tools = [ToolSpec.model_validate(t) for t in trace.start.get("tools") or []]
    steps: list[tuple[ChatRequest, AssistantMessage]] = []
    for record in trace.records:
        kind = record.get("type")
        if kind == "step":
            if record.get("tools") is not None:
                tools = [ToolSpec.model_validate(t) for t in record["tools"]]
            at = 1 if history and history[0].role == "system" else 0
            sent = [*history[:at], *shots, *history[at:]]
            turn = AssistantMessage.model_validate(record["message"])
            steps.append((ChatRequest(messages=sent, tools=tools or None), turn))
            history.append(turn)
        elif kind == "tool_result":
            history.append(
                ToolMessage(
                    tool_call_id=record["call_id"], name=record["name"], content=record["content"]
                )
            )
    return steps


def problem(example: dict[str, Any]) -> str | None:
    """Why ``example`` is not a valid chat fine-tuning line, or None."""
    try:
        messages = [parse_message(m) for m in example["messages"]]
    except (ValidationError, KeyError, TypeError, ValueError):
        return "invalid message"
    if not any(m.role == "user" for m in messages):
        return "no user message"
    open_calls: set[str] = set()
    # Calls of turns only shown (weight 0: a worked example, an earlier turn of the session)
    # may go unanswered: the answer tool's call ends a turn without a result.
    shown_calls: set[str] = set()
    for raw, m in zip(example["messages"], messages, strict=True):
        ids = {c.id for c in getattr(m, "tool_calls", None) or []}
        if m.role == "tool":
            call_id = getattr(m, "tool_call_id", "")
            if call_id not in open_calls | shown_calls:
                return "tool result without its call"
            open_calls.discard(call_id)
            shown_calls.discard(call_id)
        elif open_calls:
            return "tool call without its result"
        if isinstance(raw, dict) and raw.get("weight") == 0:
            shown_calls |= ids
        else:
            open_calls |= ids
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
        examples = examples_of(trace)
        if examples is None:
            summary.skipped["without a final answer"] += 1
            continue
        for example in examples:
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
