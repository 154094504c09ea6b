"""``agent audit``: the most recent tool calls, their decisions and who made them."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agent.terminal_text import terminal_safe
from cli.console import SafeConsole
from cli.render import json_line
from sandbox.audit import read_recent


def show_audit(path: Path, n: int, console: Console, as_json: bool = False) -> int:
    """Print the last ``n`` audit entries; returns the exit code."""
    entries = read_recent(path, n)
    if as_json:
        for entry in entries:
            console.print(json_line(entry), markup=False, soft_wrap=True)
        return 0
    if not entries:
        console.print(f"no tool calls recorded yet ({path})")
        return 0
    table = Table(title=f"last {len(entries)} tool calls ({path})")
    for column in ("time", "tool", "arguments", "decision", "by", "outcome"):
        table.add_column(column, overflow="fold")
    for e in entries:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.get("time", 0)))
        args = json.dumps(e.get("arguments", {}), ensure_ascii=False)
        outcome = e.get("outcome", "")
        if e.get("detail"):
            outcome += f": {e['detail'][:120]}"
        table.add_row(
            when,
            _cell(str(e.get("tool", ""))),
            _cell(args[:200]),
            _cell(str(e.get("decision", ""))),
            _cell(str(e.get("decided_by", ""))),
            _cell(outcome),
        )
    console.print(table)
    return 0


def _cell(text: str) -> str:
    """An entry's field in the table: neither markup nor control characters act."""
    return escape(terminal_safe(text))


def audit(
    n: int = typer.Option(20, "-n", help="how many recent entries"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object per entry"),
) -> None:
    """Show recent tool calls with their decisions (from the audit log)."""
    from cli.config import load_settings

    raise typer.Exit(show_audit(load_settings().audit_path, n, SafeConsole(), as_json))
