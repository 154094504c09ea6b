"""Traces for the page: the list, and one run as a timeline of steps, calls, decisions, results.

The files are read by ``agent.trace`` (the reader `agent traces` uses); this module only
arranges the records for the templates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.trace import Trace, grade_trace, read_trace, read_traces, trace_path
from connectors.web.stream import pretty_arguments


@dataclass(slots=True)
class TraceRow:
    """One line of the traces list."""

    run_id: str
    started: str
    outcome: str
    steps: int
    task: str
    front_end: str
    grade: str


@dataclass(slots=True)
class CallView:
    """A tool call with how it was decided and what it returned."""

    id: str
    name: str
    arguments: str
    asked: str | None = None  # the approval's outcome and who gave it, when one was asked
    decision: str | None = None
    decided_by: str | None = None
    ok: bool | None = None
    seconds: float | None = None
    result: str | None = None


@dataclass(slots=True)
class StepView:
    """One model call and the tool calls it made."""

    number: int
    time: str
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    seconds: float
    finish_reason: str
    text: str
    calls: list[CallView] = field(default_factory=list)
    ttft_s: float | None = None  # time to the first token
    raw_text: str | None = None  # what the model wrote, before it was parsed into calls
    parse_error: str | None = None
    tools: list[str] | None = None  # the tools this request offered, where they changed


@dataclass(slots=True)
class TimelineView:
    """One run, for the timeline page."""

    run_id: str
    start: dict[str, Any]
    steps: list[StepView]
    final: str | None
    error: str | None
    outcome: str
    grade: str | None


def trace_rows(folder: Path, limit: int = 200, query: str = "") -> list[TraceRow]:
    """The newest traces first; with ``query``, only those whose run id, task, outcome, grade
    or front end holds it (any case)."""
    rows = [_row(t) for t in reversed(read_traces(folder))]
    wanted = query.strip().lower()
    if wanted:
        rows = [r for r in rows if wanted in _searchable(r)]
    return rows[:limit]


def _searchable(row: TraceRow) -> str:
    return " ".join((row.run_id, row.task, row.outcome, row.grade, row.front_end)).lower()


def _row(trace: Trace) -> TraceRow:
    start, outcome = trace.start, trace.outcome or {}
    return TraceRow(
        run_id=trace.run_id,
        started=str(start.get("time", ""))[:19].replace("T", " "),
        outcome=str(outcome.get("outcome", "interrupted")),
        steps=len(trace.of_type("step")),
        task=str(start.get("task", ""))[:120],
        front_end=str(start.get("front_end", "")),
        grade=trace.grade or "",
    )


def timeline(folder: Path, run_id: str) -> TimelineView:
    """The run ``run_id`` (a unique prefix will do); a UserError if there is no such trace."""
    trace = read_trace(trace_path(folder, run_id))
    steps: list[StepView] = []
    calls: dict[str, CallView] = {}
    asks: dict[str, str] = {}  # approval id -> call id
    final = error = None
    for r in trace.records:
        kind = r.get("type")
        if kind == "step":
            message = r.get("message") or {}
            steps.append(
                StepView(
                    number=int(r.get("step") or len(steps) + 1),
                    time=str(r.get("time", ""))[11:23],
                    prompt_tokens=int(r.get("prompt_tokens") or 0),
                    cached_tokens=int(r.get("cached_tokens") or 0),
                    completion_tokens=int(r.get("completion_tokens") or 0),
                    seconds=float(r.get("seconds") or 0.0),
                    finish_reason=str(r.get("finish_reason", "")),
                    text=str(message.get("content") or ""),
                    ttft_s=None if r.get("ttft_s") is None else float(r["ttft_s"]),
                    raw_text=r.get("raw_text"),
                    parse_error=r.get("parse_error"),
                    tools=_tool_names(r.get("tools")),
                )
            )
        elif kind == "tool_call" and steps:
            fn = r["call"]["function"]
            call = CallView(r["call"]["id"], fn["name"], pretty_arguments(fn["arguments"]))
            calls[call.id] = call
            steps[-1].calls.append(call)
        elif kind == "approval_requested":
            asks[r["id"]] = r["call"]["id"]
        elif kind == "approval_resolved" and asks.get(r["id"]) in calls:
            calls[asks[r["id"]]].asked = f"{r.get('outcome')} by {r.get('by')}"
        elif kind == "tool_result" and r.get("call_id") in calls:
            call = calls[r["call_id"]]
            call.decision, call.decided_by = r.get("decision"), r.get("decided_by")
            call.ok, call.seconds = bool(r.get("ok")), float(r.get("seconds") or 0.0)
            call.result = str(r.get("content", ""))
        elif kind == "final":
            final = str(r.get("content", ""))
        elif kind == "error":
            error = f"{r.get('reason')}: {r.get('message')}"
    outcome = (trace.outcome or {}).get("outcome", "interrupted")
    return TimelineView(trace.run_id, trace.start, steps, final, error, str(outcome), trace.grade)


def _tool_names(tools: Any) -> list[str] | None:
    if not isinstance(tools, list):
        return None
    return [str((t.get("function") or {}).get("name", "")) for t in tools if isinstance(t, dict)]


def grade(folder: Path, run_id: str, verdict: str, note: str) -> str:
    """Grade the run as `agent traces grade ID good|bad --note` does; returns its full id."""
    path = trace_path(folder, run_id)
    grade_trace(path, verdict, by="user", note=note)
    return path.stem
