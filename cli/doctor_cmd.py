"""``agent doctor``: what the sandbox can and cannot enforce on this machine."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from agent.terminal_text import terminal_safe
from sandbox.doctor import checks

if TYPE_CHECKING:
    from cli.config import Settings
    from sandbox.doctor import Check


def doctor_checks(settings: Settings) -> list[Check]:
    """What `agent doctor` reports for ``settings``: each sandbox guarantee, held or not."""
    return list(checks(settings.sandbox, settings.workspace.expanduser()))


def doctor() -> None:
    """Check what the sandbox enforces on this machine, and what it cannot."""
    from cli.config import load_settings

    results = doctor_checks(load_settings())
    for check in results:
        mark = "ok  " if check.holds else "NO  "
        typer.echo(terminal_safe(f"{mark}{check.name}: {check.detail}"))
    missing = [c.name for c in results if not c.holds]
    if missing:
        typer.echo(f"not enforced here: {', '.join(missing)} (see docs/sandbox.md)")
    raise typer.Exit(0)
