"""A small JSON file changed under a lock and replaced atomically, so a kill never tears it.

Shared between the gateway and ``agent pairing`` running at the same time.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class JsonStore:
    """One JSON object on disk; ``with store.edit() as data:`` reads, yields, writes back."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[str, Any]:
        """The current contents (empty if the file does not exist yet)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except json.JSONDecodeError:
            # Only written by replace(); a broken file was edited by hand. Start over rather
            # than refuse to run, keeping the broken one next to it.
            self.path.replace(self.path.with_suffix(".broken"))
            return {}
        return data if isinstance(data, dict) else {}

    @contextlib.contextmanager
    def edit(self) -> Iterator[dict[str, Any]]:
        """Read, let the caller change, write back: all under an exclusive lock."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.with_suffix(self.path.suffix + ".lock")
        with lock_path.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                data = self.read()
                yield data
                self._write(data)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _write(self, data: dict[str, Any]) -> None:
        tmp = self.path.with_suffix(self.path.suffix + f".{os.getpid()}.tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
