"""Root mode: which uid a command runs as, and a per-command ACL grant when that uid needs one.

bubblewrap started by root keeps root's power, so when clawloop runs as root a command runs
as another uid. If the workspace belongs to an ordinary user, the command runs as that user:
it already owns the files, nothing is granted. If the workspace belongs to root, the command
runs as ``sandbox_uid`` and gets a POSIX ACL entry on the workspace's own inodes for the
length of the command, removed again afterwards. The grant:

- walks by file descriptor from the workspace without following links or leaving its file
  system, so it never lands on an inode elsewhere;
- skips regular files with more than one hard link (the other name may be outside), inodes
  that already carry an ACL of the user's own, and anything that is not a file or folder;
- never touches the workspace's parents: the sandbox mounts the workspace from a descriptor,
  so it needs no search permission on the way to it;
- leaves git metadata alone: it is read-only in the sandbox anyway, and git keeps it readable
  by everyone unless the user chose otherwise.

ACL entries are written as the ``system.posix_acl_access`` attribute directly (no ``setfacl``
process): one ``setxattr`` per inode.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import stat
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

_XATTR = "system.posix_acl_access"
_VERSION = 2
_USER_OBJ, _USER, _GROUP_OBJ, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x10, 0x20
_UNDEFINED_ID = 0xFFFFFFFF
_ENTRY = struct.Struct("<HHI")


@dataclass(slots=True, frozen=True)
class Identity:
    """Who a command runs as when clawloop is root."""

    uid: int
    gid: int
    needs_grant: bool  # True when the workspace is root's and ``uid`` needs an ACL


def identity_for(workspace: Path, sandbox_uid: int) -> Identity:
    """The workspace's owner when that is not root, else ``sandbox_uid`` with a grant."""
    info = os.stat(workspace)
    if info.st_uid != 0:
        try:
            gid = pwd.getpwuid(info.st_uid).pw_gid
        except KeyError:
            gid = info.st_gid
        return Identity(info.st_uid, gid if gid != 0 else info.st_uid, False)
    return Identity(sandbox_uid, sandbox_uid, True)


@dataclass(slots=True)
class Grant:
    """The inodes granted for one command, and those refused (shown to the model)."""

    uid: int
    granted: int = 0
    skipped_links: list[str] = field(default_factory=list)


def _acl(mode: int, uid: int, perms: int) -> bytes:
    group = (mode >> 3) & 7
    entries = [
        (_USER_OBJ, (mode >> 6) & 7, _UNDEFINED_ID),
        (_USER, perms, uid),
        (_GROUP_OBJ, group, _UNDEFINED_ID),
        (_MASK, group | perms, _UNDEFINED_ID),
        (_OTHER, mode & 7, _UNDEFINED_ID),
    ]
    return struct.pack("<I", _VERSION) + b"".join(_ENTRY.pack(*e) for e in entries)


def _ours(blob: bytes, uid: int) -> bool:
    """Whether an ACL is exactly the shape :func:`_acl` writes for ``uid``."""
    if len(blob) != 4 + 5 * _ENTRY.size:
        return False
    tags = [_ENTRY.unpack_from(blob, 4 + i * _ENTRY.size) for i in range(5)]
    return tags[1][0] == _USER and tags[1][2] == uid


def _walk(workspace: Path, whole: bool = True) -> Iterator[tuple[int, os.stat_result, str]]:
    """(fd, stat, workspace-relative name) for every folder and regular file, by descriptor,
    no links followed, not leaving the workspace's file system (the folder alone when not
    ``whole``)."""
    top = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    dev = os.fstat(top).st_dev
    yield top, os.fstat(top), "."
    if not whole:
        os.close(top)
        return
    stack = [(top, "")]
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    while stack:
        dirfd, prefix = stack.pop()
        try:
            with os.scandir(dirfd) as entries:
                found = [
                    (e.name, e.is_dir(follow_symlinks=False))
                    for e in entries
                    if e.name != ".git"
                    and (e.is_dir(follow_symlinks=False) or e.is_file(follow_symlinks=False))
                ]
        except OSError:
            found = []
        for name, is_dir in found:
            try:
                fd = os.open(name, flags | (os.O_DIRECTORY if is_dir else 0), dir_fd=dirfd)
            except OSError:
                continue  # gone, a FIFO swapped in, or a link: nothing to grant
            info = os.fstat(fd)  # what was opened, not what was listed
            rel = f"{prefix}{name}"
            if info.st_dev != dev:
                os.close(fd)
                continue
            if stat.S_ISDIR(info.st_mode):
                yield fd, info, rel
                stack.append((fd, rel + "/"))
                continue
            try:
                yield fd, info, rel
            finally:
                os.close(fd)
        os.close(dirfd)


def grant(workspace: Path, uid: int, write: bool, whole: bool = True) -> Grant:
    """Give ``uid`` access to the workspace's own inodes (see the module docstring); to the
    folder alone when not ``whole`` (a command that touches no file: the sandbox's start check)."""
    result = Grant(uid)
    for fd, info, rel in _walk(workspace, whole):
        if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)) or info.st_uid == uid:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            result.skipped_links.append(rel)
            continue
        try:
            existing = os.getxattr(fd, _XATTR)
        except OSError:
            existing = b""
        if existing and not _ours(existing, uid):
            continue  # the user's own ACL: left as it is
        perms = 7 if write else 5
        if stat.S_ISREG(info.st_mode) and not info.st_mode & 0o111:
            perms &= 6
        with contextlib.suppress(OSError):
            os.setxattr(fd, _XATTR, _acl(info.st_mode, uid, perms))
            result.granted += 1
    return result


def revoke(workspace: Path, uid: int, whole: bool = True) -> int:
    """Remove every entry :func:`grant` wrote for ``uid`` (on the folder alone when not
    ``whole``); the modes are restored. Returns the count."""
    removed = 0
    for fd, info, _ in _walk(workspace, whole):
        try:
            existing = os.getxattr(fd, _XATTR)
        except OSError:
            continue
        if _ours(existing, uid):
            group = _ENTRY.unpack_from(existing, 4 + 2 * _ENTRY.size)[1]
            with contextlib.suppress(OSError):
                os.removexattr(fd, _XATTR)
                os.chmod(fd, (info.st_mode & ~0o070 & 0o7777) | (group << 3))
                removed += 1
    return removed
