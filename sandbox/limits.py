"""Resource limits and the uid drop, as small exec wrappers in front of the command.

``prlimit`` and ``setpriv`` (util-linux) run before bubblewrap, so everything inside inherits
the limits. Wrappers rather than a Python ``preexec_fn``: that would be unsafe with the agent's
tool threads, and would force a full fork of a large Python process on every call.
"""

from __future__ import annotations

import os
import shutil

from agent.errors import UserError
from sandbox.settings import ResourceLimits

_MB = 1024 * 1024


def count_processes(uid: int) -> int:
    """Processes the host already runs as ``uid`` (RLIMIT_NPROC counts them too)."""
    count = 0
    with os.scandir("/proc") as entries:
        for entry in entries:
            if entry.name.isdigit():
                try:
                    if entry.stat(follow_symlinks=False).st_uid == uid:
                        count += 1
                except OSError:
                    continue  # the process ended while we looked
    return count


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise UserError(
            f"{name} is missing (it is part of util-linux): `apt-get install util-linux`"
        )
    return found


def file_size_mb(limits: ResourceLimits) -> int:
    """The largest file a command may write: never past the disk budget, so that one file
    is a hard bound even where the budget itself is only polled."""
    return min(limits.file_size_mb, limits.disk_budget_mb)


def prlimit_argv(limits: ResourceLimits, uid: int) -> list[str]:
    """``prlimit`` with the limits for one command run as ``uid``."""
    # RLIMIT_NPROC is a per-user count across the machine (and ignored for uid 0): allow what
    # is already running plus the configured number of new processes.
    nproc = limits.processes + count_processes(uid)
    return [
        _tool("prlimit"),
        f"--cpu={limits.cpu_s}",
        f"--as={limits.memory_mb * _MB}",
        f"--fsize={file_size_mb(limits) * _MB}",
        f"--nproc={nproc}",
        f"--nofile={limits.open_files}",
        "--core=0",
        "--",
    ]


def setpriv_argv(uid: int, gid: int | None = None) -> list[str]:
    """``setpriv`` dropping root to ``uid`` and ``gid`` (default: the same number), no groups."""
    gid = uid if gid is None else gid
    return [_tool("setpriv"), f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]


def ulimit_script(limits: ResourceLimits, uid: int) -> str:
    """The same limits as :func:`prlimit_argv`, as ``sh`` ``ulimit`` commands (hard and soft).

    The sandboxed path starts with a small ``sh`` anyway (it joins the cgroup), so setting the
    limits there saves starting ``prlimit``.
    """
    nproc = limits.processes + count_processes(uid)
    settings = [
        ("t", limits.cpu_s),
        ("v", limits.memory_mb * 1024),  # KiB
        ("f", file_size_mb(limits) * 2048),  # 512-byte blocks
        ("p", nproc),
        ("n", limits.open_files),
        ("c", 0),
    ]
    return "".join(f"ulimit -{flag} {value} || exit 125; " for flag, value in settings)
