"""What more than one layer needs to know about this machine: clawloop's cache folder, the
C compiler, and how long OpenMP threads spin.

The engine's kernels (``backends``) and the sandbox's helpers (``sandbox``) are both compiled
on first use into the cache folder, and the backends keep their weight and prompt caches there;
one definition of each, so that ``$CLAWLOOP_CACHE_DIR`` and ``$CC`` mean the same everywhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import MutableMapping
from pathlib import Path


def cache_root() -> Path:
    """clawloop's cache folder: ``$CLAWLOOP_CACHE_DIR``, else the user cache folder
    (``$XDG_CACHE_HOME/clawloop``, by default ``~/.cache/clawloop``)."""
    override = os.environ.get("CLAWLOOP_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("clawloop"))


# GNU OpenMP's own spin for a process with more threads than CPUs (its default otherwise is
# 300,000 rounds): see bound_spin_waits.
SPIN_ROUNDS = "1000"


def bound_spin_waits(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Make OpenMP threads that wait at a barrier sleep after a short spin; True if it set it.

    llama.cpp (built with OpenMP), PyTorch and the engine's C kernels run each decode step on
    OpenMP threads that meet at a barrier after every operation, hundreds of times a token. GNU
    OpenMP lets the first thread there spin 300,000 rounds before it sleeps, unless the process
    has more threads than CPUs. When another program holds a core (a build, a browser, a second
    agent), the thread the barrier waits for is often not running, and the spinning one holds the
    core it needs: with one of two cores busy, an ``agent run`` on the engine took 122 s instead
    of 2 s (``bench/busy_machine.py``, docs/engine.md "A busy machine"). With
    ``GOMP_SPINCOUNT`` at 1,000 rounds, what GNU OpenMP uses itself when threads outnumber CPUs,
    the waiting thread soon gives its core back. On an idle machine one sequence decodes as
    fast and ``agent serve`` serves as fast or faster; a batch decoded alone in one process loses
    about 12%. Only a runtime loaded after this call reads it, so it runs first in every entry
    point; a user's own ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY`` is kept.
    """
    if "GOMP_SPINCOUNT" in environ or "OMP_WAIT_POLICY" in environ:
        return False
    environ["GOMP_SPINCOUNT"] = SPIN_ROUNDS
    return True


def c_compiler() -> str | None:
    """The C compiler: ``$CC``, else ``cc``, ``gcc`` or ``clang``; None if there is none."""
    for candidate in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if candidate and shutil.which(candidate):
            return candidate
    return None


def compiler_version(compiler: str) -> str:
    """The first line of ``compiler --version`` ("" if it cannot say): part of a build's key,
    so that an upgraded compiler builds again."""
    try:
        done = subprocess.run(
            [compiler, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.splitlines()[0] if done.stdout else ""
