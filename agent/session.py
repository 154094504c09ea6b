"""A conversation kept as an append-only JSONL file, one message per line.

Each message is written, flushed and synced as soon as it exists, so a crash or a kill in the
middle of a turn never loses what was already said.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from pydantic import ValidationError

from agent.errors import UserError
from agent.messages import Message, parse_message

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_session_name(name: str) -> str:
    """Return ``name`` if it can be a session file name, else raise :class:`UserError`."""
    if not _NAME.match(name):
        raise UserError(
            f"session name {name!r} is not allowed: use letters, digits, '.', '_' and '-' (max 128)"
        )
    return name


class Session:
    """The messages of one conversation, persisted as they are appended (or kept in memory)."""

    def __init__(self, path: Path | None = None, messages: list[Message] | None = None) -> None:
        self.path = path
        self.messages: list[Message] = list(messages or [])
        self.skipped_lines = 0

    @classmethod
    def open(cls, path: Path) -> Session:
        """Load the session at ``path`` (a missing file is a new, empty session)."""
        session = cls(path)
        if path.exists():
            session.messages, session.skipped_lines = _read(path)
        return session

    def append(self, message: Message) -> None:
        """Add one message and write it through to disk."""
        self.messages.append(message)
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(message.to_record(), ensure_ascii=False) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            _ensure_line_start(fd, self.path)
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)


def _ensure_line_start(fd: int, path: Path) -> None:
    """If a previous writer died mid-line, start on a fresh line rather than gluing JSON."""
    size = path.stat().st_size
    if size == 0:
        return
    with path.open("rb") as fh:
        fh.seek(size - 1)
        if fh.read(1) != b"\n":
            os.write(fd, b"\n")


def _read(path: Path) -> tuple[list[Message], int]:
    messages: list[Message] = []
    skipped = 0
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.strip():
            continue
        try:
            messages.append(parse_message(raw))
        except (ValidationError, ValueError):
            skipped += 1  # a line cut short by a kill: everything before it is intact
    return messages, skipped
