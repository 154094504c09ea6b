"""The audit log: one JSON line per tool call, with the decision and who made it (redacted)."""

from __future__ import annotations

import json
import os
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sandbox.secrets import Redactor


@dataclass(slots=True)
class AuditEntry:
    """One tool call as the audit log records it."""

    tool: str
    arguments: dict[str, Any]
    decision: str  # "allow", "deny", "ask"
    decided_by: str  # "rule `shell(ls *)`", "default: ...", "user: once", "--yes", "no one to ask"
    outcome: str  # "ok", "error", "refused"
    detail: str = ""  # the refusal or error message, cut short
    seconds: float = 0.0
    time: float = field(default_factory=time.time)


class AuditLog:
    """Appends entries to a JSONL file; every string passes through the redactor first."""

    def __init__(self, path: Path | None, redactor: Redactor | None = None) -> None:
        self.path = path
        self.redactor = redactor or Redactor()

    def record(self, entry: AuditEntry) -> None:
        """Append one entry (a no-op when there is no file)."""
        if self.path is None:
            return
        data = self.redactor.redact_obj(asdict(entry))
        data["detail"] = data["detail"][:500]
        line = json.dumps(data, ensure_ascii=False) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)


def read_recent(path: Path, n: int = 20) -> list[dict[str, Any]]:
    """The last ``n`` entries (unreadable lines are skipped)."""
    if not path.exists():
        return []
    recent: deque[dict[str, Any]] = deque(maxlen=max(n, 0))
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                recent.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return list(recent)
