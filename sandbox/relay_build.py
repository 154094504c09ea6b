"""The network relay as a small C program (``relay.c``), built once per machine.

A command with declared hosts starts behind the relay; as ``python3 relay.py`` that costs an
interpreter's start-up on every call and puts ``python3`` in the view of a skill that declared
only other programs. ``relay.c`` does the same with libc alone. It is compiled on first use
with the system C compiler into clawloop's cache folder, under a name derived from the source,
the compiler and its flags, so a change in either builds again; linked statically where the
system has a static libc (then nothing else needs to be in the view), dynamically otherwise.
With no compiler, or when the build fails, :func:`compiled_relay` returns None and the sandbox
keeps ``relay.py``. ``CLAWLOOP_SANDBOX_RELAY=python`` chooses ``relay.py`` even so.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

_log = logging.getLogger(__name__)
SOURCE = Path(__file__).with_name("relay.c")
RELAY_VARIABLE = "CLAWLOOP_SANDBOX_RELAY"  # "python": relay.py, whether or not the C one builds
FLAGS = ("-O2", "-s", "-std=c11", "-Wall")
BUILD_TIMEOUT_S = 60
_USAGE_EXIT = 2  # the relay run without arguments: it prints its usage and exits with this


@dataclass(slots=True, frozen=True)
class CompiledRelay:
    """The built relay on the host, and whether it needs shared libraries to start."""

    path: Path
    static: bool


def compiled_relay() -> CompiledRelay | None:
    """The C relay, built on first use; None where it cannot be, or where relay.py is chosen."""
    if os.environ.get(RELAY_VARIABLE, "").strip().lower() == "python":
        return None
    found = _built()
    if found is not None and not found.path.is_file():  # the cache was emptied meanwhile
        _built.cache_clear()
        found = _built()
    return found


def describe() -> str:
    """Which relay a command with declared hosts gets here, in words (for ``agent doctor``)."""
    if os.environ.get(RELAY_VARIABLE, "").strip().lower() == "python":
        return f"relay.py under python3, as {RELAY_VARIABLE}=python chooses"
    found = compiled_relay()
    if found is None:
        return "relay.py under python3, since no C compiler built relay.c"
    linked = "statically linked" if found.static else "linked to the view's libc"
    return f"relay.c, {linked}, at {found.path}"


@functools.cache
def _built() -> CompiledRelay | None:
    compiler = _compiler()
    if compiler is None:
        _log.info("no C compiler found: the sandbox's network relay stays relay.py")
        return None
    source = SOURCE.read_bytes()
    kinds = [CompiledRelay(_binary_path(source, compiler, s), s) for s in (True, False)]
    for relay in kinds:
        if relay.path.is_file():
            return relay
    for relay in kinds:  # static where the system has a static libc, else dynamic
        if _compile(source, compiler, relay.static, relay.path):
            return relay
    return None


def _compiler() -> str | None:
    for candidate in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if candidate and shutil.which(candidate):
            return candidate
    return None


def _cache_root() -> Path:
    """clawloop's cache folder: ``$CLAWLOOP_CACHE_DIR``, else the user cache folder."""
    override = os.environ.get("CLAWLOOP_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("clawloop"))


def _binary_path(source: bytes, compiler: str, static: bool) -> Path:
    digest = hashlib.sha256(source)
    flags = (*FLAGS, "-static") if static else FLAGS
    for part in (compiler, _compiler_version(compiler), platform.machine(), flags):
        digest.update(repr(part).encode())
    kind = "static" if static else "dynamic"
    return _cache_root() / "relay" / f"relay-{kind}-{digest.hexdigest()[:16]}"


def _compiler_version(compiler: str) -> str:
    try:
        done = subprocess.run(
            [compiler, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.splitlines()[0] if done.stdout else ""


def _compile(source: bytes, compiler: str, static: bool, binary: Path) -> bool:
    """Build into a temporary file next to ``binary``, check that it runs here (a cache on a
    ``noexec`` mount would not), then move it into place atomically."""
    flags = [*FLAGS, "-static"] if static else list(FLAGS)
    try:
        binary.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=binary.parent) as work:
            (Path(work) / "relay.c").write_bytes(source)
            built = Path(work) / "relay"
            done = subprocess.run(
                [compiler, *flags, "-o", str(built), str(Path(work) / "relay.c")],
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT_S,
                check=False,
            )
            if done.returncode != 0:
                _log.info("building the relay failed: %s", done.stderr.strip()[-500:])
                return False
            # Any uid may run it: as root the command, and so the relay, runs as another one.
            built.chmod(0o755)
            ran = subprocess.run([str(built)], capture_output=True, timeout=30, check=False)
            if ran.returncode != _USAGE_EXIT:
                _log.info("the built relay does not run here (exit %s)", ran.returncode)
                return False
            os.replace(built, binary)
    except (OSError, subprocess.TimeoutExpired) as exc:
        _log.info("building the relay failed: %s", exc)
        return False
    return True
