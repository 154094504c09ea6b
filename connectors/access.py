"""Who may talk to the bot: owners, the allow list, and senders the owner paired.

Everyone else gets a pairing code and nothing more; the owner approves it on their machine with
``agent pairing approve CODE``. Users are written ``platform:id`` (``telegram:12345``).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agent.errors import UserError
from connectors.jsonstore import JsonStore

Role = Literal["owner", "allowed", "paired", "stranger"]

# No 0/O, 1/I/L: a code is read off a phone and typed into a terminal.
_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 6
CODE_TTL_S = 3600.0


def user_key(platform: str, user_id: str | int) -> str:
    """The one spelling of a user: ``telegram:12345``."""
    return f"{platform}:{user_id}"


@dataclass(slots=True, frozen=True)
class PendingPairing:
    """A code handed to a stranger, waiting for the owner."""

    code: str
    user: str
    name: str
    created: float


class AccessList:
    """Owners and allowed ids from the config, pairings from a file in the data folder."""

    def __init__(
        self, path: Path, owners: dict[str, list[str]], allowed: dict[str, list[str]]
    ) -> None:
        self.store = JsonStore(path)
        self.owners = {user_key(p, i) for p, ids in owners.items() for i in ids}
        self.allowed = {user_key(p, i) for p, ids in allowed.items() for i in ids}

    def role(self, user: str) -> Role:
        """What ``user`` may do: owners answer asks; owners, allowed and paired may talk."""
        if user in self.owners:
            return "owner"
        if user in self.allowed:
            return "allowed"
        if user in self.store.read().get("paired", {}):
            return "paired"
        return "stranger"

    def code_for(self, user: str, name: str) -> str:
        """The pairing code for a stranger (the same one while it is pending)."""
        now = time.time()
        with self.store.edit() as data:
            pending: dict[str, Any] = data.setdefault("pending", {})
            for code, entry in list(pending.items()):
                if now - float(entry.get("created", 0)) > CODE_TTL_S:
                    del pending[code]
                elif entry.get("user") == user:
                    return code
            code = "".join(secrets.choice(_ALPHABET) for _ in range(CODE_LENGTH))
            pending[code] = {"user": user, "name": name, "created": now}
            return code

    def pending(self) -> list[PendingPairing]:
        """Codes waiting for the owner, oldest first."""
        now = time.time()
        items = self.store.read().get("pending", {}).items()
        return sorted(
            (
                PendingPairing(code, e["user"], e.get("name", ""), float(e["created"]))
                for code, e in items
                if now - float(e.get("created", 0)) <= CODE_TTL_S
            ),
            key=lambda p: p.created,
        )

    def paired(self) -> dict[str, dict[str, Any]]:
        """Paired users and when they were paired."""
        return dict(self.store.read().get("paired", {}))

    def approve(self, code: str) -> str:
        """Pair the sender who was given ``code``; returns the user."""
        code = code.strip().upper()
        with self.store.edit() as data:
            entry = data.setdefault("pending", {}).pop(code, None)
            if entry is None or time.time() - float(entry.get("created", 0)) > CODE_TTL_S:
                raise UserError(
                    f"no pending pairing with code {code}: run `agent pairing list` to see them"
                )
            data.setdefault("paired", {})[entry["user"]] = {
                "name": entry.get("name", ""),
                "since": time.time(),
            }
            return str(entry["user"])

    def deny(self, code: str) -> str:
        """Drop the code ``code`` without pairing its sender; returns the user."""
        code = code.strip().upper()
        with self.store.edit() as data:
            entry = data.setdefault("pending", {}).pop(code, None)
            if entry is None:
                raise UserError(
                    f"no pending pairing with code {code}: run `agent pairing list` to see them"
                )
            return str(entry["user"])

    def revoke(self, user: str) -> str:
        """Unpair ``user`` (``telegram:123``, or a bare id if only one platform has it)."""
        with self.store.edit() as data:
            paired: dict[str, Any] = data.setdefault("paired", {})
            matches = [u for u in paired if u == user or u.split(":", 1)[-1] == user]
            if len(matches) != 1:
                known = ", ".join(sorted(paired)) or "none"
                raise UserError(
                    f"{user!r} is not one paired user (paired: {known}); write it as platform:id"
                )
            del paired[matches[0]]
            return matches[0]
