"""What runs spent, read back from their traces.

Every run's trace already holds what a usage ledger would: the first line says when it started,
in which session and chat, with which backend and model (and the prices in effect then), and
the run's ``usage`` line sums its tokens. Reading the traces folder keeps one record per run,
written once and synced; a second store could only disagree with it. A run killed before its
``usage`` line is summed from its ``step`` lines, which are written as it goes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.trace import Trace, read_trace


@dataclass(slots=True)
class RunUsage:
    """One run's spending."""

    run_id: str
    started: dt.datetime  # local time
    session: str | None = None
    chat: str | None = None
    backend: str | None = None
    model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    steps: int = 0
    seconds: float = 0.0
    prices: dict[str, Any] = field(default_factory=dict)  # as recorded when the run started

    @property
    def tokens(self) -> int:
        """Prompt plus completion tokens: what budgets count."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def day(self) -> str:
        return self.started.strftime("%Y-%m-%d")


def run_usage(trace: Trace) -> RunUsage | None:
    """The spending of the run ``trace`` records; None for a trace without a start line."""
    start = trace.start
    started = _parse_time(start.get("time"))
    if not start or started is None:
        return None
    prices = start.get("prices")
    found = RunUsage(
        run_id=trace.run_id,
        started=started,
        session=_text(start.get("session")),
        chat=_text(start.get("chat")),
        backend=_text(start.get("backend")),
        model=_text(start.get("model")),
        prices=prices if isinstance(prices, dict) else {},
    )
    totals = trace.of_type("usage")
    if totals:
        last = totals[-1]
        found.steps = _int(last.get("steps"))
        found.seconds = float(last.get("seconds") or 0.0)
        records = [last]
    else:
        records = trace.of_type("step")
        found.steps = len(records)
    for record in records:
        found.prompt_tokens += _int(record.get("prompt_tokens"))
        found.completion_tokens += _int(record.get("completion_tokens"))
        found.cached_tokens += _int(record.get("cached_tokens"))
    return found


def read_usage(folder: Path, since: dt.datetime | None = None) -> list[RunUsage]:
    """Every run in the traces ``folder`` that started at or after ``since``, oldest first.

    Files last written before ``since`` are not opened, so asking about today stays quick
    however many months of traces the folder holds.
    """
    if not folder.is_dir():
        return []
    cutoff = since.timestamp() if since is not None else None
    runs = []
    for path in folder.glob("*.jsonl"):
        try:
            if cutoff is not None and path.stat().st_mtime < cutoff:
                continue
            found = run_usage(read_trace(path))
        except OSError:
            continue  # removed while we read: it is no longer part of the record
        if found is not None and (since is None or found.started >= since):
            runs.append(found)
    return sorted(runs, key=lambda r: r.started)


def start_of_today() -> dt.datetime:
    """Local midnight: a day's budget and the ``day`` grouping follow the local calendar."""
    now = dt.datetime.now().astimezone()
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def tokens_spent(runs: Iterable[RunUsage], chat: str | None = None) -> int:
    """Prompt plus completion tokens of ``runs`` (of one chat's runs, if ``chat`` is given)."""
    return sum(r.tokens for r in runs if chat is None or r.chat == chat)


def _parse_time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone()


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
