"""Build a C kernel of the engine once per machine with the system compiler, and load it.

The library is compiled for this CPU (``-march=native``) into the cache folder, under a name
derived from the source, the compiler and the CPU's flags, so a change in any of them builds
again and nothing built elsewhere is ever loaded. With no C compiler, or when the build fails,
``load`` returns None and the engine keeps its PyTorch path: the kernels are a speed-up, never
a requirement. The build takes about a second.

OpenMP: the library links ``libgomp.so.1``; loaded after torch, it resolves to the copy torch
already loaded, so the kernels and torch's own operators share one thread pool.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import re
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

from agent.host import c_compiler, cache_root, compiler_version
from backends.local.cpu_features import cpu_signature

_log = logging.getLogger(__name__)
FLAGS = (
    "-O3",
    "-march=native",
    "-ffast-math",
    "-fno-finite-math-only",
    "-fopenmp",
    "-shared",
    "-fPIC",
    # x86: vectorized loops use the CPU's widest registers (compilers default to 256 bits
    # even where AVX-512 is there); the intrinsics' code is the same either way.
    *(("-mprefer-vector-width=512",) if platform.machine() in ("x86_64", "AMD64") else ()),
)
BUILD_TIMEOUT_S = 120
_loaded: dict[str, ctypes.CDLL | None] = {}
# A kernel file may include sibling kernel files: ``#include "group_matmul.c"``.
_LOCAL_INCLUDE = re.compile(rb'^#include "([a-z0-9_]+\.c)"', re.MULTILINE)


def load(name: str) -> ctypes.CDLL | None:
    """The compiled ``native/<name>.c``, built on first use; None where it cannot be."""
    if name not in _loaded:
        _loaded[name] = _build_and_load(name)
    return _loaded[name]


def _build_and_load(name: str) -> ctypes.CDLL | None:
    if os.environ.get("CLAWLOOP_ENGINE_NATIVE") == "0":
        return None
    compiler = c_compiler()
    if compiler is None:
        _log.info("no C compiler found: the engine's %s kernel stays in PyTorch", name)
        return None
    sources = _sources(f"{name}.c")
    library = _library_path(name, sources, compiler)
    if not library.is_file() and not _compile(sources, compiler, library):
        return None
    try:
        return ctypes.CDLL(str(library))
    except OSError as exc:
        _log.info("could not load %s (%s): the engine's kernel stays in PyTorch", library, exc)
        return None


def _sources(main: str) -> dict[str, bytes]:
    """``main`` and the sibling files it includes, transitively: file name -> text."""
    folder = resources.files("backends.engine.weights.native")
    found: dict[str, bytes] = {}
    pending = [main]
    while pending:
        name = pending.pop()
        if name not in found:
            found[name] = folder.joinpath(name).read_bytes()
            pending += [m.decode() for m in _LOCAL_INCLUDE.findall(found[name])]
    return found


def _library_path(name: str, sources: dict[str, bytes], compiler: str) -> Path:
    digest = hashlib.sha256()
    for file_name in sorted(sources):
        digest.update(file_name.encode() + b"\0" + sources[file_name])
    for part in (compiler, compiler_version(compiler), platform.machine(), cpu_signature(), FLAGS):
        digest.update(repr(part).encode())
    return cache_root() / "native" / f"{name}-{digest.hexdigest()[:16]}.so"


def _compile(sources: dict[str, bytes], compiler: str, library: Path) -> bool:
    """Compile into a temporary file next to ``library``, then move it into place atomically.

    The first of ``sources`` is the file compiled; the others sit beside it for its includes."""
    try:
        library.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=library.parent) as work:
            for file_name, text in sources.items():
                (Path(work) / file_name).write_bytes(text)
            source_file = Path(work) / next(iter(sources))
            built = Path(work) / "kernel.so"
            done = subprocess.run(
                [compiler, *FLAGS, "-o", str(built), str(source_file), "-lm"],
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT_S,
                check=False,
            )
            if done.returncode != 0:
                _log.info("building %s failed: %s", library.name, done.stderr.strip()[-500:])
                return False
            os.replace(built, library)
    except (OSError, subprocess.TimeoutExpired) as exc:
        _log.info("building %s failed: %s", library.name, exc)
        return False
    return True
