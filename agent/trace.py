"""Traces: every run leaves one JSONL file, written line by line as the run goes.

The first line (``start``) says what ran: the run id, the prompt version, the backend and model,
the conversation as it stood and the tools offered. Each event of the loop follows as one line
(steps with the raw model text and the parsed message, tool calls, tool results with their
decisions), then the outcome. Every line is flushed and synced when written, so a run killed
half-way leaves a trace that reads back up to the kill. Grades are appended later as ``grade``
lines; nothing already written is rewritten.

Secrets are removed by the ``redact`` function the caller supplies (the sandbox's redactor).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.errors import UserError
from agent.events import ErrorEvent, Event, FinalEvent, TokenEvent, event_to_json
from agent.messages import Message, ToolSpec

Redact = Callable[[str], str]
_ID = re.compile(r"^[0-9a-f]{4,32}$")


def _now() -> str:
    return (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
        + f".{int(time.time() * 1000) % 1000:03d}Z"
    )


@dataclass
class TraceWriter:
    """Appends one run's records to ``folder/RUN_ID.jsonl``."""

    folder: Path
    run_id: str
    redact: Redact = field(default=lambda text: text)
    path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.path = self.folder / f"{self.run_id}.jsonl"

    def start(
        self,
        *,
        prompt: str,
        backend: str,
        model: str | None,
        messages: list[Message],
        tools: list[ToolSpec],
        extra: dict[str, Any] | None = None,
    ) -> None:
        """The first line: what is about to run."""
        self.write(
            {
                "type": "start",
                "run_id": self.run_id,
                "prompt": prompt,
                "backend": backend,
                "model": model,
                "messages": [m.to_record() for m in messages],
                "tools": [t.to_wire() for t in tools],
                **(extra or {}),
            }
        )

    def event(self, event: Event) -> None:
        """One loop event; streamed tokens are left out (the step holds the whole text)."""
        if isinstance(event, TokenEvent):
            return
        self.write(event_to_json(event))

    def outcome(
        self, outcome: str, answer: str | None, detail: str = "", reason: str | None = None
    ) -> None:
        """The last line: ``answered``, ``error`` or ``interrupted``; an error names its
        ``reason`` (the ErrorEvent's: ``max_steps``, ``budget``, ``repeated_error``, ...)."""
        record: dict[str, Any] = {
            "type": "outcome",
            "outcome": outcome,
            "answer": answer,
            "detail": detail,
        }
        if reason is not None:
            record["reason"] = reason
        self.write(record)

    def write(self, record: dict[str, Any]) -> None:
        """Append one record, redacted, flushed and synced."""
        record = {**record, "time": _now()}
        line = self.redact(json.dumps(record, ensure_ascii=False)) + "\n"
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)


def traced(
    events: Iterator[Event], writer: TraceWriter, start: Callable[[], None] | None = None
) -> Iterator[Event]:
    """Pass ``events`` through, writing each to the trace and the outcome at the end.

    ``start`` writes the first line; it is called when the first event arrives, once the loop
    has added the system prompt and the task to the conversation.
    """
    answer: str | None = None
    outcome, detail = "interrupted", "the run ended before an answer"
    reason: str | None = None
    started = False
    try:
        for event in events:
            if not started and start is not None:
                start()
            started = True
            writer.event(event)
            if isinstance(event, FinalEvent):
                answer, outcome, detail = event.content, "answered", ""
            elif isinstance(event, ErrorEvent):
                outcome, detail = "error", f"{event.reason}: {event.message}"
                reason = event.reason
            yield event
    finally:
        if started:
            writer.outcome(outcome, answer, detail, reason)


@dataclass(slots=True)
class Trace:
    """A trace read back: its records in order (a torn last line is dropped)."""

    path: Path
    records: list[dict[str, Any]]

    @property
    def run_id(self) -> str:
        return self.path.stem

    @property
    def start(self) -> dict[str, Any]:
        return next((r for r in self.records if r.get("type") == "start"), {})

    @property
    def outcome(self) -> dict[str, Any] | None:
        return next((r for r in reversed(self.records) if r.get("type") == "outcome"), None)

    @property
    def grade(self) -> str | None:
        """The latest grade, ``good`` or ``bad``, if any."""
        return next((r["grade"] for r in reversed(self.records) if r.get("type") == "grade"), None)

    @property
    def fixed_by(self) -> str | None:
        """The run id of the corrected run that replaced this one, if it was fixed."""
        return next((r["by_run"] for r in reversed(self.records) if r.get("type") == "fixed"), None)

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("type") == kind]


def read_trace(path: Path) -> Trace:
    """Read a trace file; lines that are not whole JSON objects (a kill mid-write) are skipped."""
    records: list[dict[str, Any]] = []
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                records.append(record)
    return Trace(path, records)


def read_traces(folder: Path) -> list[Trace]:
    """Every trace in ``folder``, oldest first (by file time); none if the folder is missing."""
    if not folder.is_dir():
        return []
    return [read_trace(p) for p in sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime)]


def trace_path(folder: Path, run_id: str) -> Path:
    """The trace file of ``run_id`` (a unique prefix is enough); a UserError if none."""
    if not _ID.match(run_id):
        raise UserError(f"{run_id!r} is not a run id: `agent traces list` shows them")
    exact = folder / f"{run_id}.jsonl"
    if exact.is_file():
        return exact
    found = sorted(folder.glob(f"{run_id}*.jsonl")) if folder.is_dir() else []
    if len(found) == 1:
        return found[0]
    if not found:
        raise UserError(f"no trace {run_id!r} in {folder}: `agent traces list` shows them")
    raise UserError(f"{run_id!r} matches {len(found)} traces: give more of the id")


def grade_trace(path: Path, grade: str, by: str = "user", note: str = "") -> None:
    """Append a grade line to the trace at ``path``."""
    if grade not in {"good", "bad"}:
        raise UserError(f"grade must be good or bad, not {grade!r}")
    run_id = path.stem
    TraceWriter(path.parent, run_id).write(
        {"type": "grade", "grade": grade, "by": by, "note": note}
    )


def mark_fixed(path: Path, fixed_run: str) -> None:
    """Append a line saying the run at ``path`` was corrected by the run ``fixed_run``."""
    TraceWriter(path.parent, path.stem).write({"type": "fixed", "by_run": fixed_run})
