"""Full-text search over past sessions: an SQLite FTS5 index kept beside the session files.

Sessions are append-only JSONL, so the index remembers, for each file, how many bytes it has
read and picks up from there; a file that shrank or whose beginning changed (rewritten) is read
again from the start, and a file that is gone leaves the index. Lines are parsed with the
session's own message parser; a line that is not a message (a ``{"compaction": ...}`` record,
a line cut short by a kill) is skipped.

A tool result labelled untrusted (a mail, a web page, an MCP result) is indexed with that
label, and so is every assistant turn that came after untrusted content in its session (an
injection may have written it); whoever shows a hit shows its label with it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from pydantic import ValidationError

from agent.messages import AssistantMessage, Message, ToolMessage, UserMessage, parse_message

HEAD_BYTES = 4096  # the beginning of a file, fingerprinted to notice a rewrite
AFTER_UNTRUSTED = "written after untrusted content was read"
_TERM = re.compile(r"\w+", re.UNICODE)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    name TEXT PRIMARY KEY, inode INTEGER, offset INTEGER, head TEXT, seq INTEGER, tainted INTEGER
);
CREATE VIRTUAL TABLE IF NOT EXISTS messages USING fts5(
    content, session UNINDEXED, seq UNINDEXED, role UNINDEXED, label UNINDEXED,
    tokenize = 'porter unicode61'
);
"""


@dataclass(slots=True, frozen=True)
class Hit:
    """One message that matched: its session, its place in it, who wrote it, an excerpt."""

    session: str
    seq: int
    role: str
    label: str  # "" for the user's own or a trusted result; else where the words came from
    excerpt: str


@dataclass(slots=True)
class _FileState:
    inode: int
    offset: int
    head: str
    seq: int
    tainted: bool


class SessionIndex:
    """The index of ``sessions_dir``, stored at ``path``; :meth:`update` before searching."""

    def __init__(self, path: Path, sessions_dir: Path) -> None:
        self.path = path
        self.sessions_dir = sessions_dir

    def update(self) -> int:
        """Index what was added to the sessions since the last update; returns the messages
        indexed."""
        present = (
            {p.stem: p for p in self.sessions_dir.glob("*.jsonl") if p.is_file()}
            if self.sessions_dir.is_dir()
            else {}
        )
        added = 0
        with self._connect() as db:
            known = {row[0] for row in db.execute("SELECT name FROM files")}
            for gone in known - present.keys():
                _drop(db, gone)
            for name, path in sorted(present.items()):
                added += self._update_file(db, name, path)
        return added

    def search(self, query: str, limit: int = 8) -> list[Hit]:
        """The best matches for ``query``'s words, all of them if any message has them all,
        else any of them; best first."""
        terms = [t for t in _TERM.findall(query.lower()) if len(t) > 1 or t.isdigit()]
        if not terms or not self.path.exists():
            return []
        quoted = [f'"{t}"' for t in dict.fromkeys(terms)]
        with self._connect() as db:
            for match in (" ".join(quoted), " OR ".join(quoted)):
                rows = db.execute(
                    "SELECT session, seq, role, label, "
                    "snippet(messages, 0, '[', ']', ' ... ', 16) "
                    "FROM messages WHERE messages MATCH ? ORDER BY rank LIMIT ?",
                    (match, limit),
                ).fetchall()
                if rows:
                    return [Hit(str(s), int(q), str(r), str(lb), str(x)) for s, q, r, lb, x in rows]
        return []

    def _update_file(self, db: sqlite3.Connection, name: str, path: Path) -> int:
        stat = path.stat()
        state = _state(db, name)
        if state is not None and state.inode == stat.st_ino and stat.st_size == state.offset:
            return 0  # nothing new
        with path.open("rb") as fh:
            if state is None or _rewritten(state, stat, fh):
                _drop(db, name)
                state = _FileState(stat.st_ino, 0, "", 0, False)
            fh.seek(state.offset)
            data = fh.read()
            end = data.rfind(b"\n") + 1  # a last line not yet ended is read next time
            state.offset += end
            state.head = _head(fh, state.offset)
        added = 0
        for message in _messages(data[:end]):
            state.seq += 1
            state.tainted = state.tainted or _is_untrusted(message)
            text = _searchable(message)
            if text:
                db.execute(
                    "INSERT INTO messages (content, session, seq, role, label) VALUES (?,?,?,?,?)",
                    (text, name, state.seq, message.role, _label(message, state.tainted)),
                )
                added += 1
        db.execute(
            "INSERT OR REPLACE INTO files VALUES (?,?,?,?,?,?)",
            (name, stat.st_ino, state.offset, state.head, state.seq, int(state.tainted)),
        )
        return added

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not self.path.exists():
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))  # private, like sessions
        db = sqlite3.connect(self.path, timeout=10)
        try:
            with db:  # one transaction: a crash leaves the index as it was
                db.executescript(_SCHEMA)
                yield db
        finally:
            db.close()


def _state(db: sqlite3.Connection, name: str) -> _FileState | None:
    row = db.execute(
        "SELECT inode, offset, head, seq, tainted FROM files WHERE name = ?", (name,)
    ).fetchone()
    return None if row is None else _FileState(row[0], row[1], row[2], row[3], bool(row[4]))


def _rewritten(state: _FileState, stat: os.stat_result, fh: BinaryIO) -> bool:
    """Whether the file is no longer the one indexed with lines appended."""
    if stat.st_ino != state.inode or stat.st_size < state.offset:
        return True
    return _head(fh, state.offset) != state.head


def _head(fh: BinaryIO, offset: int) -> str:
    """A fingerprint of the file's beginning, up to what was indexed."""
    fh.seek(0)
    return hashlib.sha256(fh.read(min(offset, HEAD_BYTES))).hexdigest()


def _drop(db: sqlite3.Connection, name: str) -> None:
    db.execute("DELETE FROM messages WHERE session = ?", (name,))
    db.execute("DELETE FROM files WHERE name = ?", (name,))


def _messages(data: bytes) -> Iterator[Message]:
    for raw in data.decode("utf-8", errors="replace").splitlines():
        if not raw.strip():
            continue
        try:
            yield parse_message(raw)
        except (ValidationError, ValueError):
            continue  # a compaction record, or a line cut short by a kill


def _is_untrusted(message: Message) -> bool:
    return (
        isinstance(message, ToolMessage)
        and message.provenance is not None
        and not message.provenance.trusted
    )


def _searchable(message: Message) -> str:
    """What of a message is worth finding again (the system prompt is the same everywhere)."""
    if isinstance(message, UserMessage):
        return message.content
    if isinstance(message, AssistantMessage):
        calls = [f"{c.function.name} {c.function.arguments}" for c in message.tool_calls or []]
        return "\n".join([message.content or "", *calls]).strip()
    if isinstance(message, ToolMessage):
        return message.content
    return ""


def _label(message: Message, tainted: bool) -> str:
    if isinstance(message, ToolMessage):
        label = message.provenance
        return label.describe() if label is not None and not label.trusted else ""
    if isinstance(message, AssistantMessage) and tainted:
        return AFTER_UNTRUSTED
    return ""
