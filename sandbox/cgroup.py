"""A control group for sandboxed commands, so memory and process limits hold for the whole tree.

Per-process limits (``RLIMIT_AS``) let a command start many processes that each stay under the
limit. A cgroup bounds them together. cgroup v2 is used where this process's own cgroup can
delegate the memory controller; otherwise the v1 memory and pids hierarchies where they are
mounted and writable. Where neither is possible the command runs with per-process limits only,
and ``agent doctor`` says so.

The command joins its cgroup through a two-line ``sh`` wrapper that writes its own pid to
``cgroup.procs`` before it execs the rest, so nothing it starts is ever outside.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

_JOIN = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; '
_counter = itertools.count()
# clawloop-<pid>-<n>-<random>: the random part keeps a name unique when a pid comes round again
# and a group of a killed process is still there.
_NAME = re.compile(r"clawloop-(\d+)-\d+(?:-[0-9a-f]+)?")
_swept: set[Path] = set()
_pending: list[Path] = []  # groups whose processes had not yet gone when they were removed
_lock = threading.RLock()  # parallel runners; a finalizer may remove a group inside create


@dataclass(slots=True)
class CgroupPlace:
    """Where this process may create child cgroups: the v2 folder, or v1 memory and pids."""

    version: int  # 2, 1, or 0 for none
    memory: Path | None = None  # parent folder with a memory controller
    pids: Path | None = None  # parent folder with a pids controller (v1; v2 uses memory's)
    reason: str = ""  # why there is none, or what is missing

    @property
    def usable(self) -> bool:
        return self.memory is not None


@dataclass(slots=True)
class Cgroup:
    """One command's cgroup folders (one in v2, one per controller in v1)."""

    folders: list[Path] = field(default_factory=list)

    def procs_files(self) -> list[str]:
        return [str(f / "cgroup.procs") for f in self.folders]

    def wrap(self, argv: list[str], prelude: str = "") -> list[str]:
        """``argv`` run by ``sh`` so that it starts inside the cgroup, after ``prelude``."""
        script = f'{_JOIN}{prelude}exec "$@"'
        return ["/bin/sh", "-c", script, "sh", *self.procs_files(), "--", *argv]

    def remove(self) -> None:
        """Remove the folders once the processes are gone (the pid namespace dies async)."""
        for folder in reversed(self.folders):
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
            else:
                with _lock:
                    _pending.append(folder)  # still busy: tried again when the next is made


def _own_paths() -> dict[str, str]:
    """controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    found: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                found[name] = path
    return found


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, options) of the cgroup file systems."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
                found.append((parts[1], parts[2], set(parts[3].split(","))))
    return found


def _writable(folder: Path) -> bool:
    return folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)


def find_place() -> CgroupPlace:
    """Where child cgroups can be made for commands, or why they cannot."""
    own = _own_paths()
    mounts = _mounts()
    reasons = []
    for point, kind, _ in mounts:
        if kind != "cgroup2" or "" not in own:
            continue
        folder = Path(point) / own[""].lstrip("/")
        try:
            controllers = (folder / "cgroup.subtree_control").read_text().split()
        except OSError:
            continue
        if "memory" not in controllers:
            reasons.append(f"cgroup v2 at {folder} does not delegate the memory controller")
        elif not _writable(folder):
            reasons.append(f"cgroup v2 folder {folder} is not writable by this user")
        else:
            pids = folder if "pids" in controllers else None
            return CgroupPlace(2, folder, pids)
    v1: dict[str, Path] = {}
    for point, kind, options in mounts:
        for name in ("memory", "pids"):
            if kind == "cgroup" and name in options and name in own:
                folder = Path(point) / own[name].lstrip("/")
                if _writable(folder):
                    v1[name] = folder
                else:
                    reasons.append(f"cgroup v1 {name} folder {folder} is not writable")
    if "memory" in v1:
        return CgroupPlace(1, v1["memory"], v1.get("pids"))
    return CgroupPlace(0, reason="; ".join(reasons) or "no cgroup file system is mounted")


def create(place: CgroupPlace, memory_bytes: int, max_pids: int) -> Cgroup:
    """A fresh cgroup under ``place`` (one per runner); empty when there is no place."""
    group = Cgroup()
    if not place.usable:
        return group
    name = f"clawloop-{os.getpid()}-{next(_counter)}-{secrets.token_hex(4)}"
    try:
        assert place.memory is not None  # checked by usable
        with _lock:
            for parent in (place.memory, place.pids):
                if parent is not None and parent not in _swept:
                    _swept.add(parent)
                    sweep(parent)
            _retry_pending()
        mem = place.memory / name
        mem.mkdir()
        group.folders.append(mem)
        if place.version == 2:
            (mem / "memory.max").write_text(str(memory_bytes))
            if (mem / "memory.swap.max").exists():
                (mem / "memory.swap.max").write_text("0")
            if place.pids is not None:
                (mem / "pids.max").write_text(str(max_pids))
        else:
            (mem / "memory.limit_in_bytes").write_text(str(memory_bytes))
            if place.pids is not None:
                pids = place.pids / name
                pids.mkdir()
                group.folders.append(pids)
                (pids / "pids.max").write_text(str(max_pids))
    except OSError:
        group.remove()
        raise
    return group


def sweep(parent: Path) -> list[Path]:
    """Remove the empty groups under ``parent`` that processes no longer running left behind
    (killed before they cleaned up, or whose pid namespace died after ``remove`` gave up);
    returns those removed. A group with a process in it cannot be removed, and one of a live
    process is not tried."""
    removed = []
    with contextlib.suppress(OSError):
        for folder in parent.iterdir():
            found = _NAME.fullmatch(folder.name)
            if found is None or _alive(int(found.group(1))):
                continue
            with contextlib.suppress(OSError):
                folder.rmdir()
                removed.append(folder)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _retry_pending() -> None:
    """Remove the groups that were still busy when their runner went (a long-running gateway
    makes many runners; without this each busy one would stay until the process ends). Called
    with ``_lock`` held."""
    for folder in list(_pending):
        try:
            folder.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            continue
        _pending.remove(folder)
