"""A conversation kept as an append-only JSONL file, one message per line.

Each message is written, flushed and synced as soon as it exists, so a crash or a kill in the
middle of a turn never loses what was already said.

Compaction appends a record, not a rewrite: ``{"compaction": {...}}`` says that the first
``upto`` messages are now covered by its summary. Every message stays in the file (``messages``
holds them all, for people and for the data-flow gate); :meth:`Session.window` is what the
model is sent: the system prompt with the latest summary, then the messages after ``upto``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.errors import UserError
from agent.messages import Message, SystemMessage, parse_message

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_session_name(name: str) -> str:
    """Return ``name`` if it can be a session file name, else raise :class:`UserError`."""
    if not _NAME.match(name):
        raise UserError(
            f"session name {name!r} is not allowed: use letters, digits, '.', '_' and '-' (max 128)"
        )
    return name


# How the summary is introduced inside the system prompt the model is sent.
SUMMARY_HEADING = "Summary of the earlier conversation (older turns were compacted):"


class Compaction(BaseModel):
    """One compaction: the first ``upto`` messages are covered by ``summary``."""

    model_config = ConfigDict(extra="allow")

    upto: int = Field(ge=0)
    summary: str
    method: str = "extractive"  # "extractive" or "model"
    prompt: str = ""  # the summary prompt's id@version, for a model summary
    at: str = ""  # when, ISO 8601
    tokens_before: int = 0  # the estimated request size that called for it
    untrusted: list[str] = Field(default_factory=list)  # sources the covered turns quoted


class Session:
    """The messages of one conversation, persisted as they are appended (or kept in memory)."""

    def __init__(self, path: Path | None = None, messages: list[Message] | None = None) -> None:
        self.path = path
        self.messages: list[Message] = list(messages or [])
        self.compactions: list[Compaction] = []
        self.skipped_lines = 0

    @classmethod
    def open(cls, path: Path) -> Session:
        """Load the session at ``path`` (a missing file is a new, empty session)."""
        session = cls(path)
        if path.exists():
            session.messages, session.compactions, session.skipped_lines = _read(path)
        return session

    @property
    def compacted(self) -> int:
        """How many of the first messages the latest summary covers (0: none)."""
        return self.compactions[-1].upto if self.compactions else 0

    @property
    def summary(self) -> str | None:
        return self.compactions[-1].summary if self.compactions else None

    def window(self) -> list[Message]:
        """What the model is sent: the system prompt (with the latest summary), then the
        messages after the compacted ones."""
        if not self.compactions:
            return list(self.messages)
        head = self.messages[0] if self.messages and self.messages[0].role == "system" else None
        summary = f"{SUMMARY_HEADING}\n{self.compactions[-1].summary}"
        system = SystemMessage(content=f"{head.content}\n\n{summary}" if head else summary)
        rest = self.messages[max(self.compacted, 1 if head else 0) :]
        return [system, *rest]

    def append(self, message: Message) -> None:
        """Add one message and write it through to disk."""
        self.messages.append(message)
        self._write({**message.to_record()})

    def compact(self, record: Compaction) -> None:
        """Record that the first ``record.upto`` messages are now covered by its summary."""
        if not self.compacted <= record.upto <= len(self.messages):
            raise ValueError(f"a compaction cannot cover {record.upto} messages here")
        self.compactions.append(record)
        self._write({"compaction": record.model_dump(mode="json")})

    def _write(self, record: dict[str, object]) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(record, ensure_ascii=False) + "\n"
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


def _read(path: Path) -> tuple[list[Message], list[Compaction], int]:
    messages: list[Message] = []
    compactions: list[Compaction] = []
    skipped = 0
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
            if isinstance(data, dict) and "compaction" in data:
                record = Compaction.model_validate(data["compaction"])
                if record.upto <= len(messages):
                    compactions.append(record)
                    continue
                raise ValueError("a compaction past the messages before it")
            messages.append(parse_message(data))
        except (ValidationError, ValueError):
            skipped += 1  # a line cut short by a kill: everything before it is intact
    return messages, compactions, skipped
