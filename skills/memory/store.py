"""Memory as plain markdown files a person can read and edit, one entry per line.

``USER.md`` holds the user's profile and standing instructions, ``MEMORY.md`` facts, and
``notes/YYYY-MM-DD.md`` the day's notes. An entry reads ``- 2026-12-03: the cat is Pixel``; one
written while untrusted content was in the conversation names where it may have come from,
``- 2026-12-03 (from a mail from x@y): ...``. Lines a person writes by hand in another shape
are entries too (headings and blank lines are not). Forgotten entries are moved to
``.history``, never lost. Every change holds a lock on the folder, so a chat, the gateway and
``agent memory`` can change it at once.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Kind = Literal["profile", "fact", "note"]

PROFILE_FILE = "USER.md"
FACTS_FILE = "MEMORY.md"
NOTES_DIR = "notes"
HISTORY_FILE = ".history"
MAX_ENTRY = 500  # characters of one entry; memory is for short facts, not documents

_ENTRY = re.compile(r"^[-*]\s+(\d{4}-\d{2}-\d{2})(?:\s+\(from (.+?)\))?:\s*(.*)$")
_HEADERS = {
    PROFILE_FILE: "# About the user\n\n<!-- profile and standing instructions, one a line -->\n\n",
    FACTS_FILE: "# Facts\n\n<!-- what the assistant remembers, one fact a line -->\n\n",
}


@dataclass(slots=True, frozen=True)
class Entry:
    """One line of a memory file: where it is, its date and source (if written), its text."""

    file: str  # relative to the memory folder: "USER.md", "notes/2026-12-03.md"
    line: str  # as written, without the newline
    date: str  # "" for a line written by hand without one
    source: str  # "" for the user's own; else "a mail from x@y"
    text: str

    @property
    def kind(self) -> Kind:
        if self.file == PROFILE_FILE:
            return "profile"
        return "fact" if self.file == FACTS_FILE else "note"


def parse_line(file: str, raw: str) -> Entry | None:
    """The entry on one line, or None for a heading, a comment or a blank."""
    stripped = raw.strip()
    if not stripped or stripped.startswith(("#", "<!--")):
        return None
    found = _ENTRY.match(stripped)
    if found:
        return Entry(file, raw, found[1], found[2] or "", found[3])
    if stripped[:2] in ("- ", "* "):
        return Entry(file, raw, "", "", stripped[2:].strip())
    return Entry(file, raw, "", "", stripped)


def one_line(text: str) -> str:
    """An entry's text on one line: whitespace collapsed, a leading list marker dropped."""
    flat = " ".join(text.split())
    return flat[2:] if flat[:2] in ("- ", "* ") else flat


class MemoryStore:
    """The memory folder: add, list, find and forget entries."""

    def __init__(self, root: Path, today: Callable[[], dt.date] = dt.date.today) -> None:
        self.root = root
        self.today = today

    def file_for(self, kind: Kind) -> str:
        if kind == "profile":
            return PROFILE_FILE
        if kind == "fact":
            return FACTS_FILE
        return f"{NOTES_DIR}/{self.today().isoformat()}.md"

    def files(self) -> list[str]:
        """The memory files that exist, profile first, then facts, then notes by day."""
        found = [name for name in (PROFILE_FILE, FACTS_FILE) if (self.root / name).is_file()]
        notes = self.root / NOTES_DIR
        if notes.is_dir():
            found += [f"{NOTES_DIR}/{p.name}" for p in sorted(notes.glob("*.md")) if p.is_file()]
        return found

    def entries(self, files: list[str] | None = None) -> list[Entry]:
        """Every entry of ``files`` (default: all), in file order."""
        out: list[Entry] = []
        for name in self.files() if files is None else files:
            out += [e for raw in self._lines(name) if (e := parse_line(name, raw)) is not None]
        return out

    def add(self, text: str, kind: Kind = "fact", source: str = "") -> Entry:
        """Append one entry, dated today; ``source`` says where it may have come from."""
        body = one_line(text)
        if not body:
            raise ValueError("an empty entry")
        name = self.file_for(kind)
        origin = " ".join(source.replace("):", ")").split())
        line = f"- {self.today().isoformat()}{f' (from {origin})' if origin else ''}: {body}"
        with self._locked():
            path = self.root / name
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            header = "" if path.exists() else _HEADERS.get(name, f"# Notes, {path.stem}\n\n")
            _append(path, f"{header}{line}\n")
        entry = parse_line(name, line)
        if entry is None:  # the line was just built in an entry's shape
            raise RuntimeError(f"cannot read back {line!r}")
        return entry

    def matching(self, query: str) -> list[Entry]:
        """The entries ``query`` names: the whole line or text, else those containing it."""
        wanted = " ".join(query.split()).lower().removeprefix("- ")
        if not wanted:
            return []
        every = self.entries()
        exact = [
            e
            for e in every
            if wanted in (e.line.strip().lower().removeprefix("- "), e.text.lower())
        ]
        return exact or [e for e in every if wanted in " ".join(e.line.split()).lower()]

    def forget(self, entries: list[Entry]) -> list[Entry]:
        """Remove ``entries`` from their files, keeping each in ``.history``; returns those
        removed (an entry changed meanwhile is left alone)."""
        removed: list[Entry] = []
        with self._locked():
            for name in dict.fromkeys(e.file for e in entries):
                lines = self._lines(name)
                doomed = {e.line for e in entries if e.file == name}
                kept = [raw for raw in lines if raw not in doomed]
                gone = [e for raw in lines if raw in doomed and (e := parse_line(name, raw))]
                if gone:
                    self._rewrite(name, kept)
                    removed += gone
            if removed:
                stamp = self.today().isoformat()
                _append(
                    self.root / HISTORY_FILE,
                    "".join(f"{stamp} forgot from {e.file}: {e.line.strip()}\n" for e in removed),
                )
        return removed

    def _lines(self, name: str) -> list[str]:
        try:
            return (self.root / name).read_text(encoding="utf-8", errors="replace").splitlines()
        except (FileNotFoundError, IsADirectoryError):
            return []

    def _rewrite(self, name: str, lines: list[str]) -> None:
        """Replace a file in one step: a reader sees the old text or the new, never half."""
        path = self.root / name
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.unlink(missing_ok=True)
        _append(temporary, "".join(f"{raw}\n" for raw in lines))
        os.replace(temporary, path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        with (self.root / ".lock").open("a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)


def _append(path: Path, text: str) -> None:
    """Append to a private file (memory is about a person: only its owner reads it)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)
