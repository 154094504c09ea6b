"""Resource limits applied in the child before it starts bubblewrap (inherited by everything)."""

from __future__ import annotations

import os
import resource
from collections.abc import Callable

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


def rlimits(limits: ResourceLimits, uid: int) -> dict[int, int]:
    """The limits for one command run as ``uid``: what it may add on top of what is running."""
    # RLIMIT_NPROC is a per-user count across the machine and is ignored for uid 0.
    nproc = limits.processes + count_processes(uid)
    return {
        resource.RLIMIT_CPU: limits.cpu_s,
        resource.RLIMIT_AS: limits.memory_mb * _MB,
        resource.RLIMIT_FSIZE: limits.file_size_mb * _MB,
        resource.RLIMIT_NPROC: nproc,
        resource.RLIMIT_CORE: 0,
    }


def preexec(values: dict[int, int]) -> Callable[[], None]:
    """A ``preexec_fn`` that lowers the limits (it only calls setrlimit: safe after fork)."""
    items = list(values.items())

    def apply() -> None:
        for which, value in items:
            _soft, hard = resource.getrlimit(which)
            cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (cap, cap))

    return apply
