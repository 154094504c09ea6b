"""The sandbox's small C helpers (``relay.c``, ``exec_guard.c``), built once per machine.

Each is compiled on first use with the system C compiler into clawloop's cache folder, under a
name derived from the source, the compiler and its flags, so a change in either builds again;
linked statically where the system has a static libc (then nothing else needs to be in the
sandbox's view), dynamically otherwise. A helper run without arguments prints its usage and
exits 2: that is how a build is checked to run here. With no compiler, or when the build
fails, :func:`build` returns None and the caller says what it does instead.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import platform
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from agent.host import c_compiler, cache_root, compiler_version

_log = logging.getLogger(__name__)
FLAGS = ("-O2", "-s", "-std=c11", "-Wall")
BUILD_TIMEOUT_S = 60
_USAGE_EXIT = 2  # a helper run without arguments prints its usage and exits with this


@dataclass(slots=True, frozen=True)
class CompiledHelper:
    """A built helper on the host, and whether it needs shared libraries to start."""

    path: Path
    static: bool


def build(source: Path) -> CompiledHelper | None:
    """The helper built from ``source`` (a C file), on first use; None where it cannot be."""
    found = _built(source)
    if found is not None and not found.path.is_file():  # the cache was emptied meanwhile
        _built.cache_clear()
        found = _built(source)
    return found


@functools.cache
def _built(source_path: Path) -> CompiledHelper | None:
    compiler = c_compiler()
    name = source_path.stem
    if compiler is None:
        _log.info("no C compiler found: the sandbox's %s is not built", name)
        return None
    source = source_path.read_bytes()
    kinds = [CompiledHelper(_binary_path(name, source, compiler, s), s) for s in (True, False)]
    for helper in kinds:
        if helper.path.is_file():
            return helper
    for helper in kinds:  # static where the system has a static libc, else dynamic
        if compile_helper(name, source, compiler, helper.static, helper.path):
            return helper
    return None


def _binary_path(name: str, source: bytes, compiler: str, static: bool) -> Path:
    digest = hashlib.sha256(source)
    flags = (*FLAGS, "-static") if static else FLAGS
    for part in (compiler, compiler_version(compiler), platform.machine(), flags):
        digest.update(repr(part).encode())
    kind = "static" if static else "dynamic"
    return cache_root() / name / f"{name}-{kind}-{digest.hexdigest()[:16]}"


def compile_helper(name: str, source: bytes, compiler: str, static: bool, binary: Path) -> bool:
    """Build into a temporary file next to ``binary``, check that it runs here (a cache on a
    ``noexec`` mount would not), then move it into place atomically."""
    flags = [*FLAGS, "-static"] if static else list(FLAGS)
    try:
        binary.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=binary.parent) as work:
            (Path(work) / f"{name}.c").write_bytes(source)
            built = Path(work) / name
            done = subprocess.run(
                [compiler, *flags, "-o", str(built), str(Path(work) / f"{name}.c")],
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT_S,
                check=False,
            )
            if done.returncode != 0:
                _log.info("building the %s failed: %s", name, done.stderr.strip()[-500:])
                return False
            # Any uid may run it: as root the command, and so the helper, runs as another one.
            built.chmod(0o755)
            ran = subprocess.run([str(built)], capture_output=True, timeout=30, check=False)
            if ran.returncode != _USAGE_EXIT:
                _log.info("the built %s does not run here (exit %s)", name, ran.returncode)
                return False
            os.replace(built, binary)
    except (OSError, subprocess.TimeoutExpired) as exc:
        _log.info("building the %s failed: %s", name, exc)
        return False
    return True
