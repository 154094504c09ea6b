"""`agent sessions`: list, show and remove saved conversations."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from agent.errors import UserError
from agent.messages import AssistantMessage, Message, ToolMessage
from agent.session import Compaction, Session, check_session_name
from agent.terminal_text import terminal_safe
from cli.config import load_settings
from cli.console import SafeConsole

sessions_app = typer.Typer(help="List, show and remove saved sessions.", no_args_is_help=True)
console = SafeConsole(highlight=False)


def _path(name: str) -> Path:
    settings = load_settings()
    path = settings.sessions_dir / f"{check_session_name(name)}.jsonl"
    if not path.exists():
        raise UserError(f"no session named {name!r}: `agent sessions list` shows them")
    return path


@dataclass(frozen=True, slots=True)
class SavedSession:
    """One saved session as the list shows it."""

    name: str
    messages: int
    changed: dt.datetime
    first: str  # its first request


def saved_sessions(folder: Path) -> list[SavedSession]:
    """The sessions in ``folder``, newest first."""
    files = (
        sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True)
        if folder.exists()
        else []
    )
    found = []
    for path in files:
        session = Session.open(path)
        first = next((m.content for m in session.messages if m.role == "user"), "")
        when = dt.datetime.fromtimestamp(path.stat().st_mtime)
        found.append(SavedSession(path.stem, len(session.messages), when, str(first or "")))
    return found


@sessions_app.command("list")
def list_sessions() -> None:
    """List sessions, newest first."""
    folder = load_settings().sessions_dir
    found = saved_sessions(folder)
    if not found:
        console.print(f"no sessions yet in {folder}")
        return
    table = Table("name", "messages", "last change", "first request")
    for s in found:
        table.add_row(s.name, str(s.messages), s.changed.strftime("%Y-%m-%d %H:%M"), s.first[:60])
    console.print(table)


@sessions_app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="Session name.")],
    full: Annotated[
        bool, typer.Option("--full", help="Also the messages a compaction summarised.")
    ] = False,
) -> None:
    """Print a session's messages (from its latest summary on, unless --full)."""
    session = Session.open(_path(name))
    marks = {c.upto: c for c in session.compactions}
    start = 0 if full else session.compacted
    if not full and session.compactions:
        _summary(session.compactions[-1], shown_all=False)
    for index, message in enumerate(session.messages[start:], start):
        if full and index in marks:
            _summary(marks[index], shown_all=True)
        _message(message)
    if session.skipped_lines:
        console.print(f"[yellow]{session.skipped_lines} unreadable line(s) skipped[/yellow]")


def _summary(record: Compaction, shown_all: bool) -> None:
    what = (
        f"the {record.upto} messages above were compacted"
        if shown_all
        else f"{record.upto} earlier messages compacted (--full shows them)"
    )
    console.print(f"[magenta]-- {what}; {record.method} summary:[/magenta]")
    console.print(f"[dim]{_shown(record.summary)}[/dim]")


def _message(message: Message) -> None:
    if isinstance(message, AssistantMessage):
        if message.content:
            console.print(f"[bold]assistant:[/bold] {_shown(message.content)}")
        for call in message.tool_calls or []:
            console.print(
                f"[cyan]tool call {_shown(call.function.name)}[/cyan] "
                f"{_shown(call.function.arguments)}"
            )
    elif isinstance(message, ToolMessage):
        console.print(
            f"[green]tool result ({_shown(message.name or '')}):[/green] {_shown(message.content)}"
        )
    else:
        console.print(f"[bold]{message.role}:[/bold] {_shown(str(message.content))}")


@sessions_app.command("rm")
def remove(names: Annotated[list[str], typer.Argument(help="Session names.")]) -> None:
    """Delete sessions."""
    for name in names:
        _path(name).unlink()
        console.print(f"removed {name}")


def _shown(text: str) -> str:
    """A message's text inside markup: neither markup nor control characters act."""
    return escape(terminal_safe(text))
