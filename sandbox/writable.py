"""Which parts of the workspace a command may write when only some paths are declared writable.

The workspace is mounted read-only and each writable part is mounted read-write over it, from
a descriptor opened by walking from the workspace without following links (a link planted in
the workspace cannot turn a declared folder into a host folder). What a glob grants, never
more than it matches:

- ``out/**`` (or ``out/**/*``): the folder ``out`` and all below it; made if missing, so the
  command can create files there;
- ``report.txt``, ``data``: that file or folder, if it exists;
- any other glob (``out/*.csv``, ``*.md``): the regular files that match it now (they can be
  rewritten in place, no new file can be made next to them);
- ``**``: the whole workspace.

Absolute globs outside the workspace grant nothing (the sandbox's own ``/tmp`` is writable
anyway). Git metadata and start-up files stay read-only inside a writable part, as everywhere.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.rules import PathSubject
from sandbox.safewalk import Walk

_WILD = frozenset("*?[")
_EVERYTHING = ("**", "**/*")
MAX_MATCHES = 2000


@dataclass(slots=True)
class WritableParts:
    """Workspace-relative paths to mount read-write; ``whole`` when that is the workspace."""

    whole: bool = False
    folders: list[str] = field(default_factory=list)  # made if missing
    paths: list[str] = field(default_factory=list)  # existing files or folders


def writable_parts(workspace: Path, globs: Sequence[str]) -> WritableParts:
    """What ``globs`` (a skill's ``write`` manifest) let a command write in ``workspace``."""
    parts = WritableParts()
    for glob in globs:
        pattern = _relative(glob.strip(), workspace)
        if pattern is None:
            continue
        words = pattern.split("/")
        cut = next((i for i, w in enumerate(words) if _WILD & set(w)), len(words))
        prefix, rest = "/".join(words[:cut]), "/".join(words[cut:])
        if rest in _EVERYTHING:
            if not prefix:
                parts.whole = True
            else:
                parts.folders.append(prefix)
        elif not rest:
            parts.paths.append(prefix)
        else:
            parts.paths += _matches(workspace, prefix, pattern)
    return parts


def _relative(glob: str, workspace: Path) -> str | None:
    glob = glob[2:] if glob.startswith("./") else glob
    if glob.startswith("/"):
        ws = str(workspace).rstrip("/") + "/"
        if not glob.startswith(ws):
            return None
        glob = glob[len(ws) :]
    words = [w for w in glob.split("/") if w not in ("", ".")]
    if not words or ".." in words:
        return None
    return "/".join(words)


def _matches(workspace: Path, prefix: str, pattern: str) -> list[str]:
    """Regular files under ``prefix`` that ``pattern`` matches (links not followed)."""
    subject = PathSubject("path")
    found: list[str] = []
    top = workspace / prefix
    for entry in Walk(top, seconds=5.0):
        if entry.kind == "dir":
            entry.prune = entry.name == ".git"
        if entry.kind != "file":
            continue
        rel = entry.path.relative_to(workspace).as_posix()
        if subject.matches(pattern, {"path": rel}, "allow", workspace):
            found.append(rel)
            if len(found) >= MAX_MATCHES:
                return found
    return found


def open_parts(workspace: Path, workspace_fd: int, parts: WritableParts) -> list[tuple[int, Path]]:
    """Descriptors of ``parts`` (not ``whole``) opened beneath the workspace, with their paths;
    a part that is missing or reached through a link is left out."""
    opened = []
    for rel in [*parts.folders, *parts.paths]:
        fd = open_beneath(workspace_fd, rel)
        if fd is not None:
            opened.append((fd, workspace / rel))
    return opened


def make_folders(workspace: Path, parts: WritableParts) -> None:
    """Create the declared writable folders that are missing, owned like the folder above.

    Run before the command (and before any root-mode grant, which then covers them).
    """
    ws = os.open(workspace, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for rel in parts.folders:
            fd = open_beneath(ws, rel, make=True)
            if fd is not None:
                os.close(fd)
    finally:
        os.close(ws)


def open_beneath(workspace_fd: int, rel: str, *, make: bool = False) -> int | None:
    """An ``O_PATH`` descriptor of ``rel`` under the workspace, no link followed on the way.

    With ``make``, missing folders are created. None if it is missing, a link, a file with
    other hard links (the other name may be outside), or neither a file nor a folder.
    """
    words = rel.split("/")
    fd = os.dup(workspace_fd)
    try:
        for i, word in enumerate(words):
            last = i == len(words) - 1
            flags = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC | (0 if last else os.O_DIRECTORY)
            try:
                nxt = os.open(word, flags, dir_fd=fd)
            except FileNotFoundError:
                if not make:
                    return None
                _make(fd, word)
                nxt = os.open(word, flags | os.O_DIRECTORY, dir_fd=fd)
            except OSError:
                return None
            os.close(fd)
            fd = nxt
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode) or (stat.S_ISREG(info.st_mode) and info.st_nlink == 1):
            fd, result = -1, fd
            return result
        return None
    except OSError:
        return None
    finally:
        if fd >= 0:
            os.close(fd)


def _make(parent_fd: int, name: str) -> None:
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o755, dir_fd=parent_fd)
        above = os.fstat(parent_fd)
        if os.geteuid() == 0:
            # clawloop as root makes it for the workspace's owner, who runs the command.
            os.chown(name, above.st_uid, above.st_gid, dir_fd=parent_fd, follow_symlinks=False)
