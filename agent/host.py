"""What more than one layer needs to know about this machine: clawloop's cache folder and the
C compiler.

The engine's kernels (``backends``) and the sandbox's helpers (``sandbox``) are both compiled
on first use into the cache folder, and the backends keep their weight and prompt caches there;
one definition of each, so that ``$CLAWLOOP_CACHE_DIR`` and ``$CC`` mean the same everywhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def cache_root() -> Path:
    """clawloop's cache folder: ``$CLAWLOOP_CACHE_DIR``, else the user cache folder
    (``$XDG_CACHE_HOME/clawloop``, by default ``~/.cache/clawloop``)."""
    override = os.environ.get("CLAWLOOP_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("clawloop"))


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
