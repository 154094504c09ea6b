"""Files sent to the bot, saved in the workspace's ``inbox`` folder.

A sender names the file, so the name is cleaned to plain letters, digits, ``.``, ``_`` and
``-`` with no folder part; the folder is opened without following links, and a file is only
ever created, never overwritten: a name already taken gets ``-1``, ``-2``, ... before its suffix.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

INBOX = "inbox"
MAX_NAME = 100
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str) -> str:
    """``name`` without any folder part, in a safe alphabet, not hidden, at most 100 chars."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    # Stripped of leading and trailing dots and dashes: no "..", no ".hidden", no "-option".
    cleaned = re.sub(r"_+", "_", _UNSAFE.sub("_", base)).strip("._-") or "file"
    stem, ext = _split(cleaned)
    ext = ext[:20]
    return stem[: MAX_NAME - len(ext)] + ext


def saved_note(path: Path) -> str:
    """The line added to the turn's text so the model knows where a sent file is."""
    return f"[The user sent a file; it is saved in the workspace at {path}.]"


def save_file(workspace: Path, name: str, data: bytes) -> Path:
    """Write ``data`` as a new file in ``workspace/inbox``; returns its path in the workspace.

    Raises :class:`OSError` if the inbox is a link or not a folder (nothing is written then).
    """
    name = safe_name(name)
    stem, ext = _split(name)
    root = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(INBOX, 0o755, dir_fd=root)
        # O_NOFOLLOW: an inbox replaced by a link (to /etc, say) is refused, not followed.
        box = os.open(
            INBOX, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root
        )
        try:
            return Path(INBOX) / _create(box, stem, ext, data)
        finally:
            os.close(box)
    finally:
        os.close(root)


def _create(folder: int, stem: str, ext: str, data: bytes) -> str:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for n in range(10_000):
        candidate = f"{stem}{ext}" if n == 0 else f"{stem}-{n}{ext}"
        try:
            fd = os.open(candidate, flags, 0o644, dir_fd=folder)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return candidate
    raise FileExistsError(f"no free name for {stem}{ext} in the inbox")


def _split(name: str) -> tuple[str, str]:
    stem, dot, ext = name.rpartition(".")
    return (stem, f".{ext}") if dot and stem else (name, "")
