"""Files sent with a message from the page, saved in the workspace's ``inbox`` folder.

The rules are the chat bots' (see ``connectors/gateway.py``): at most ``max_file_bytes`` each,
names cleaned and never overwriting (:mod:`connectors.inbox`), and the turn's text gains a line
naming where each file is. The page is always its owner's (the local user, or whoever holds the
token), so it may always send files. All files are checked before any is saved: a message
with one file too big saves none.
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path

from pydantic import BaseModel, Field

from agent.errors import UserError
from connectors.inbox import save_file, saved_note


class SentFile(BaseModel):
    """One file as the page sends it: its name and its bytes in base64."""

    name: str = Field(min_length=1, max_length=255)
    data: str


class FilesRefused(UserError):
    """A file of the message cannot be taken (too big, not base64); nothing was saved."""


def decode(files: list[SentFile], limit: int) -> list[tuple[str, bytes]]:
    """Every file's bytes, or :class:`FilesRefused` naming the first that cannot be taken."""
    decoded = []
    for file in files:
        # Four base64 characters carry three bytes: a file far past the limit is refused
        # before it is decoded.
        if len(file.data) // 4 * 3 > limit + 3:
            raise FilesRefused(_too_big(file.name, len(file.data) // 4 * 3, limit))
        try:
            data = base64.b64decode(file.data, validate=True)
        except (binascii.Error, ValueError):
            raise FilesRefused(f"{file.name} did not arrive whole; send it again") from None
        if len(data) > limit:
            raise FilesRefused(_too_big(file.name, len(data), limit))
        decoded.append((file.name, data))
    return decoded


def save_all(workspace: Path, files: list[tuple[str, bytes]], text: str) -> str:
    """Save the files in the inbox; returns ``text`` with a line naming each saved file."""
    notes = [saved_note(save_file(workspace, name, data)) for name, data in files]
    return "\n\n".join([text, *notes] if text else notes)


def _too_big(name: str, size: int, limit: int) -> str:
    return f"{name} is too big ({size} bytes; the limit is {limit}): nothing was saved"
