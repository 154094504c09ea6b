"""What the gateway keeps across restarts: cursors, messages in flight, messages answered.

A message is written to ``inflight`` before its cursor moves past it, and moved to ``answered``
once its reply is sent. After a crash, whatever is still in flight is answered again; whatever
is answered is never answered twice, even if the platform delivers it again.
"""

from __future__ import annotations

import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any

from connectors.base import Incoming
from connectors.jsonstore import JsonStore

ANSWERED_KEPT = 5000


class GatewayState:
    """The gateway's persisted state; every change is on disk before the method returns."""

    def __init__(self, path: Path) -> None:
        self.store = JsonStore(path)
        self._lock = threading.Lock()
        data = self.store.read()
        self._cursors: dict[str, Any] = dict(data.get("cursors", {}))
        self._inflight: dict[str, dict[str, Any]] = dict(data.get("inflight", {}))
        self._answered: list[str] = list(data.get("answered", []))
        self._answered_set = set(self._answered)

    def cursor(self, name: str) -> Any:
        """A connector's saved position (Telegram's offset, a channel's last message id)."""
        with self._lock:
            return self._cursors.get(name)

    def set_cursor(self, name: str, value: Any) -> None:
        with self._lock:
            self._cursors[name] = value
            self._save()

    def seen(self, key: str) -> bool:
        """Whether a message is answered or already being worked on."""
        with self._lock:
            return key in self._answered_set or key in self._inflight

    def begin(self, message: Incoming) -> bool:
        """Record a message as in flight; False if it was seen before (a duplicate)."""
        with self._lock:
            if message.key in self._answered_set or message.key in self._inflight:
                return False
            self._inflight[message.key] = asdict(message)
            self._save()
            return True

    def finish(self, key: str) -> None:
        """The message is answered: never answer it again."""
        with self._lock:
            self._inflight.pop(key, None)
            if key not in self._answered_set:
                self._answered.append(key)
                self._answered_set.add(key)
                if len(self._answered) > ANSWERED_KEPT:
                    dropped = self._answered[:-ANSWERED_KEPT]
                    self._answered = self._answered[-ANSWERED_KEPT:]
                    self._answered_set.difference_update(dropped)
            self._save()

    def unfinished(self) -> list[Incoming]:
        """Messages whose turn was cut short (by a crash or a kill), in arrival order."""
        with self._lock:
            return [Incoming.from_dict(data) for data in self._inflight.values()]

    def _save(self) -> None:
        with self.store.edit() as data:
            data["cursors"] = self._cursors
            data["inflight"] = self._inflight
            data["answered"] = self._answered
