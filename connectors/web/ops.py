"""The operations page's content: read-only tables the command line fills in.

This package sits below ``cli/``, which owns pairing, skills, jobs, usage and the sandbox
check, so the page does not compute any of them: `agent web` passes a function that gathers
them with the very functions `agent pairing list`, `agent skills list`, `agent cron list`,
`agent usage` and `agent doctor` use, and the page shows what it returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(slots=True)
class Section:
    """One table of the page; ``problem`` instead when its part could not be read."""

    id: str
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    empty: str = "nothing yet"
    notes: list[str] = field(default_factory=list)
    problem: str | None = None


Gather = Callable[[], list[Section]]


def guarded(id: str, title: str, build: Callable[[], Section]) -> Section:
    """``build()``'s section, or one saying why it failed: one broken part (a job store from a
    newer version, a pairing file being rewritten) must not take the whole page down."""
    try:
        return build()
    except Exception as exc:  # shown on the page, the other sections still render
        return Section(id, title, [], problem=f"{type(exc).__name__}: {exc}")
