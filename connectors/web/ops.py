"""The operations page's content: tables the command line fills in, and the changes it makes.

This package sits below ``cli/``, which owns pairing, skills, jobs, usage and the sandbox
check, so the page does not compute any of them: `agent web` passes a function that gathers
them with the very functions `agent pairing list`, `agent skills list`, `agent cron list`,
`agent usage` and `agent doctor` use, and the page shows what it returns. Likewise a change
(approve a pairing code, approve a skill, pause a job) is done by a function `agent web`
passes, made of the commands' own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

Action = Literal["pairing-approve", "pairing-deny", "skill-approve", "job-pause", "job-resume"]


@dataclass(slots=True)
class RowAction:
    """A button on a row: ``action`` done to ``target`` (a code, a skill, a job id)."""

    action: Action
    target: str
    label: str


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
    actions: list[list[RowAction]] = field(default_factory=list)  # per row, when it has any


Gather = Callable[[], list[Section]]
# Does ``action`` to ``target``; returns what was done in one line, or raises UserError.
Act = Callable[[Action, str], str]


def guarded(id: str, title: str, build: Callable[[], Section]) -> Section:
    """``build()``'s section, or one saying why it failed: one broken part (a job store from a
    newer version, a pairing file being rewritten) must not take the whole page down."""
    try:
        return build()
    except Exception as exc:  # shown on the page, the other sections still render
        return Section(id, title, [], problem=f"{type(exc).__name__}: {exc}")
