"""`agent sessions search`: full-text search over past sessions (an SQLite FTS5 index)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from agent.terminal_text import terminal_safe
from cli.config import load_settings
from cli.console import SafeConsole
from cli.sessions_cmd import sessions_app
from skills.memory.tools import MAX_HITS, session_index

console = SafeConsole(highlight=False)


@sessions_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="Words to look for.")],
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=MAX_HITS)] = 10,
) -> None:
    """Find past messages that mention QUERY's words, best first (the index updates itself)."""
    settings = load_settings()
    index = session_index(settings.data_dir, settings.sessions_dir, settings.memory)
    index.update()
    hits = index.search(query, limit)
    if not hits:
        console.print(f"no session mentions {escape(terminal_safe(query))!r}")
        raise typer.Exit(1)
    for hit in hits:
        where = escape(terminal_safe(f"{hit.session} #{hit.seq} {hit.role}"))
        label = f" [yellow]\\[untrusted: {escape(terminal_safe(hit.label))}][/yellow]"
        console.print(
            f"[bold]{where}[/bold]{label if hit.label else ''}: "
            f"{escape(terminal_safe(hit.excerpt))}",
            soft_wrap=True,
        )
