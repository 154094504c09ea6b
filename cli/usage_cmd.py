"""`agent usage`: tokens, steps, time and cost of past runs, by day, session, chat or model.

The figures are read from the traces folder (see agent/usage.py): every run leaves its trace,
so nothing else has to be kept.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.markup import escape
from rich.table import Table

from agent.usage import RunUsage, read_usage
from cli.config import Prices, Settings, load_settings
from cli.console import SafeConsole
from cli.trace_export import since_time

console = SafeConsole(highlight=False)


class By(StrEnum):
    """How `agent usage` groups runs."""

    day = "day"
    session = "session"
    chat = "chat"
    model = "model"


_KEYS: dict[By, Callable[[RunUsage], str]] = {
    By.day: lambda r: r.day,
    By.session: lambda r: r.session or "(no session)",
    By.chat: lambda r: r.chat or "(not a chat)",
    By.model: lambda r: "/".join(x for x in (r.backend, r.model) if x) or "(unknown)",
}


@dataclass(slots=True)
class Row:
    """The runs of one group, summed."""

    key: str
    runs: int = 0
    steps: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cost: float | None = None  # None: no run in the group has a price

    def add(self, run: RunUsage, cost: float | None) -> None:
        self.runs += 1
        self.steps += run.steps
        self.prompt_tokens += run.prompt_tokens
        self.cached_tokens += run.cached_tokens
        self.completion_tokens += run.completion_tokens
        self.seconds += run.seconds
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost


def run_cost(run: RunUsage, settings: Settings) -> float | None:
    """What ``run`` cost at the prices recorded when it ran, else the configured ones."""
    prices: Prices | None = None
    if run.prices:
        try:
            prices = Prices.model_validate(run.prices)
        except ValidationError:
            prices = None
    if prices is None or not prices.given():
        prices = settings.usage.prices_for(run.backend, run.model)
    if prices is None or not prices.given():
        return None
    prompt = prices.price_prompt_per_mtok or 0.0
    cached = prices.price_cached_per_mtok if prices.price_cached_per_mtok is not None else prompt
    completion = prices.price_completion_per_mtok or 0.0
    fresh = max(0, run.prompt_tokens - run.cached_tokens)
    total = fresh * prompt + run.cached_tokens * cached + run.completion_tokens * completion
    return total / 1_000_000


def summarise(runs: list[RunUsage], by: By, settings: Settings) -> list[Row]:
    """One row per group, in the order the groups first ran, then the total."""
    rows: dict[str, Row] = {}
    total = Row("total")
    for run in runs:
        key = _KEYS[by](run)
        cost = run_cost(run, settings)
        rows.setdefault(key, Row(key)).add(run, cost)
        total.add(run, cost)
    return [*rows.values(), total]


def row_figures(row: Row) -> list[str]:
    """A row's figures as the tables show them, in the columns after its key."""
    return [
        str(row.runs),
        str(row.steps),
        f"{row.prompt_tokens:,}",
        f"{row.cached_tokens:,}",
        f"{row.completion_tokens:,}",
        f"{row.seconds:.0f} s",
        "-" if row.cost is None else f"{row.cost:.4f}",
    ]


def usage(
    by: Annotated[By, typer.Option("--by", help="Group runs by day, session, chat or model.")] = (
        By.day
    ),
    since: Annotated[
        str | None,
        typer.Option("--since", help="Only runs since a date or an age: 2026-05-01, 7d, 12h."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per row.")] = False,
) -> None:
    """Tokens, steps, time and cost of past runs, read from their traces."""
    settings = load_settings()
    start = (
        dt.datetime.fromisoformat(since_time(since)).replace(tzinfo=dt.UTC)
        if since is not None
        else None
    )
    runs = read_usage(settings.traces_dir, start)
    rows = summarise(runs, by, settings)
    if as_json:
        for row in rows:
            typer.echo(json.dumps({"by": by.value, **_row_record(row)}))
        return
    if not runs:
        console.print("no runs in that time: every `agent run` and chat turn leaves a trace")
        return
    table = Table()
    for column in (by.value, "runs", "steps", "prompt", "cached", "completion", "time", "cost"):
        table.add_column(column, justify="left" if column == by.value else "right")
    for row in rows:
        table.add_row(escape(row.key), *row_figures(row), end_section=row is rows[-2])
    console.print(table)


def _row_record(row: Row) -> dict[str, object]:
    return {
        "key": row.key,
        "runs": row.runs,
        "steps": row.steps,
        "prompt_tokens": row.prompt_tokens,
        "cached_tokens": row.cached_tokens,
        "completion_tokens": row.completion_tokens,
        "seconds": round(row.seconds, 3),
        "cost": None if row.cost is None else round(row.cost, 6),
    }
