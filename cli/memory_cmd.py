"""`agent memory`: show, edit and forget what the assistant remembers (plain files)."""

from __future__ import annotations

import os
import shlex
import subprocess
from typing import Annotated

import typer

from agent.errors import UserError
from agent.terminal_text import terminal_safe
from cli.config import load_settings
from skills.memory.store import FACTS_FILE, PROFILE_FILE, MemoryStore
from skills.memory.tools import memory_folder

memory_app = typer.Typer(
    help="Show, edit and forget what the assistant remembers.", no_args_is_help=True
)

# Names people type for the files, besides the files' own names.
_ALIASES = {
    "profile": PROFILE_FILE,
    "user": PROFILE_FILE,
    "facts": FACTS_FILE,
    "memory": FACTS_FILE,
}


def _store() -> MemoryStore:
    settings = load_settings()
    return MemoryStore(memory_folder(settings.data_dir, settings.memory))


def _file(store: MemoryStore, which: str) -> str:
    """A memory file by alias, by name, or ``today`` (today's notes); nothing outside the
    folder."""
    if which == "today":
        return store.file_for("note")
    name = _ALIASES.get(which.lower(), which)
    if name.startswith("notes/") and not name.endswith(".md"):
        name += ".md"
    root = store.root.resolve()
    if not name.endswith(".md") or root not in (root / name).resolve().parents:
        raise UserError(
            f"{which!r} is not a memory file: name profile, facts, today, or one of "
            f"{', '.join(store.files()) or 'the files `agent memory show` lists'}"
        )
    return name


@memory_app.command("show")
def show(
    which: Annotated[
        str | None, typer.Argument(help="profile, facts, today or a file (default: all).")
    ] = None,
) -> None:
    """Print the memory files."""
    store = _store()
    names = [_file(store, which)] if which else store.files()
    if not names or not all((store.root / n).is_file() for n in names):
        what = f"no {names[0]}" if which else "nothing remembered"
        typer.echo(terminal_safe(f"{what} yet in {store.root}"))
        return
    for name in names:
        text = (store.root / name).read_text(encoding="utf-8", errors="replace")
        typer.echo(f"== {name} ({store.root / name}) ==")
        typer.echo(terminal_safe(text.rstrip("\n")))
        typer.echo("")


@memory_app.command("edit")
def edit(
    which: Annotated[str, typer.Argument(help="profile, facts, today or a file.")] = "profile",
) -> None:
    """Open a memory file in $VISUAL or $EDITOR (created if missing)."""
    store = _store()
    name = _file(store, which)
    path = store.root / name
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    try:
        done = subprocess.run([*shlex.split(editor), str(path)], check=False)
    except FileNotFoundError:
        raise UserError(f"the editor {editor!r} was not found: set $EDITOR") from None
    raise typer.Exit(done.returncode)


@memory_app.command("forget")
def forget(
    query: Annotated[str, typer.Argument(help="An entry, or text the entries contain.")],
) -> None:
    """Remove the entries that contain QUERY (they are kept in the memory's .history file)."""
    store = _store()
    matches = store.matching(query)
    if not matches:
        raise UserError(f"nothing remembered contains {query!r}: `agent memory show` lists it all")
    for entry in store.forget(matches):
        typer.echo(terminal_safe(f"forgot from {entry.file}: {entry.line.strip()}"))
