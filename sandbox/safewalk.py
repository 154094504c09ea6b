"""Walking and reading the workspace on the host without ever blocking or running away.

Everything clawloop itself does to the workspace outside the sandbox (the scan before and after
each command, the ``files`` tools, the listings offered to the model) goes through here,
because the workspace is written by sandboxed commands: a FIFO named ``.git/config`` or
``notes.txt`` would block a plain ``open`` for ever, a device would read without end, and a
link loop or a folder of millions of entries would stall a naive walk.

So every folder and file is opened with ``O_NOFOLLOW | O_NONBLOCK``, anything that is not a
regular file or a folder (links, FIFOs, sockets, devices) is reported by kind and never
opened, reads are capped in bytes, and walks are capped in entries and in time.
"""

from __future__ import annotations

import itertools
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
MAX_ENTRIES = 200_000


@dataclass(slots=True)
class Entry:
    """One entry met on a walk; set ``prune`` on a folder to keep the walk out of it."""

    path: Path
    name: str
    kind: str  # "dir", "file", "link" or "other" (FIFO, socket, device)
    device: int  # for folders (0 for files and links)
    mode: int  # the file type bits
    prune: bool = False

    @property
    def is_socket(self) -> bool:
        return stat.S_ISSOCK(self.mode)


@dataclass(slots=True)
class Walk:
    """A bounded, link-free walk of ``root``; iterate it for :class:`Entry` objects.

    Folder by folder, names sorted; a folder's own entries come before those of the folders
    under it (the order of ``os.walk``). ``complete`` is False afterwards when the entry or
    time bound cut it short. Folders on another file system are not entered.
    """

    root: Path
    max_entries: int = MAX_ENTRIES
    seconds: float | None = None
    same_device: bool = True
    complete: bool = True
    seen: int = field(default=0)

    def __iter__(self) -> Iterator[Entry]:
        deadline = None if self.seconds is None else time.monotonic() + self.seconds
        try:
            device = os.lstat(self.root).st_dev
        except OSError:
            return
        stack = [self.root]
        while stack:
            folder = stack.pop()
            room = self.max_entries - self.seen
            entries = _list(folder, room + 1)
            if len(entries) > room:
                self.complete = False
                entries = entries[:room]
            self.seen += len(entries)
            below: list[Path] = []
            for found in entries:
                yield found
                own_device = not self.same_device or found.device == device
                if found.kind == "dir" and not found.prune and own_device:
                    below.append(found.path)
            if not self.complete:
                return
            if deadline is not None and time.monotonic() > deadline:
                self.complete = False
                return
            stack += reversed(below)


def _list(folder: Path, limit: int) -> list[Entry]:
    """Up to ``limit`` entries of ``folder`` (itself opened without following a link)."""
    try:
        fd = os.open(folder, _OPEN | os.O_DIRECTORY)
    except OSError:
        return []
    found = []
    try:
        with os.scandir(fd) as listing:
            for item in itertools.islice(listing, limit):
                # The kind comes from the listing itself (no system call); only folders (for
                # their device) and the odd kinds (for their mode) are looked at further.
                if item.is_file(follow_symlinks=False):
                    found.append(Entry(folder / item.name, item.name, "file", 0, stat.S_IFREG))
                    continue
                if item.is_symlink():
                    found.append(Entry(folder / item.name, item.name, "link", 0, stat.S_IFLNK))
                    continue
                try:
                    info = item.stat(follow_symlinks=False)
                except OSError:
                    continue
                mode = info.st_mode
                found.append(Entry(folder / item.name, item.name, _kind(mode), info.st_dev, mode))
    except OSError:
        return found
    finally:
        os.close(fd)
    found.sort(key=lambda e: e.name)
    return found


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "link"
    return "other"


def kind_of(path: Path) -> str | None:
    """What ``path`` itself is (links not followed), or None if it is missing."""
    try:
        return _kind(os.lstat(path).st_mode)
    except OSError:
        return None


def open_regular(path: Path) -> int | None:
    """A read-only descriptor of ``path`` if it is a regular file (not a link, FIFO or
    device), else None. Never blocks."""
    try:
        fd = os.open(path, _OPEN)
    except OSError:
        return None
    if stat.S_ISREG(os.fstat(fd).st_mode):
        return fd
    os.close(fd)
    return None


def read_regular(path: Path, limit: int = 1_000_000) -> bytes | None:
    """At most ``limit`` bytes of ``path`` if it is a regular file, else None. Never blocks."""
    fd = open_regular(path)
    if fd is None:
        return None
    try:
        chunks = []
        left = limit
        while left > 0:
            data = os.read(fd, min(left, 1 << 20))
            if not data:
                break
            chunks.append(data)
            left -= len(data)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_text(path: Path, limit: int = 1_000_000) -> str | None:
    """:func:`read_regular` decoded as UTF-8 (errors replaced)."""
    data = read_regular(path, limit)
    return None if data is None else data.decode("utf-8", errors="replace")
