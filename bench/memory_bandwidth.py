"""This machine's memory bandwidth: a read sweep and the STREAM triad, in C, at a thread count.

``memory_bandwidth.c`` is compiled once with the flags the engine's own kernels use
(``backends.engine.weights.native.build.FLAGS``: -O3 -march=native -ffast-math -fopenmp) into
clawloop's cache folder, and loaded with ctypes. Each figure is the best of ``reps`` sweeps
(STREAM's convention: on a shared machine the best run is the one least disturbed), with the
median beside it. Run by hand:

    PYTHONPATH=. python bench/memory_bandwidth.py --threads 1,2
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import os
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path

SOURCE = Path(__file__).with_name("memory_bandwidth.c")
# Far past the last-level cache (32 MiB here): every sweep reads from memory.
DRAM_BYTES = 1 << 30


@dataclass(slots=True)
class Bandwidth:
    """One measurement: bytes moved per sweep and the GB/s of the best and median sweep."""

    kernel: str
    threads: int
    bytes: int
    best_gb_s: float
    median_gb_s: float


def _library() -> ctypes.CDLL:
    from agent.host import c_compiler, cache_root
    from backends.engine.weights.native.build import FLAGS
    from backends.local.cpu_features import cpu_signature

    compiler = c_compiler()
    if compiler is None:
        raise SystemExit("no C compiler ($CC, cc, gcc or clang): the bandwidth benchmark needs one")
    text = SOURCE.read_bytes()
    digest = hashlib.sha256(text + repr((compiler, FLAGS, cpu_signature())).encode()).hexdigest()
    library = cache_root() / "bench" / f"memory_bandwidth-{digest[:16]}.so"
    if not library.is_file():
        library.parent.mkdir(parents=True, exist_ok=True)
        built = library.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run([compiler, *FLAGS, "-o", str(built), str(SOURCE)], check=True)
        os.replace(built, library)
    lib = ctypes.CDLL(str(library))
    for name in ("read_sweep", "triad"):
        function = getattr(lib, name)
        function.restype = ctypes.c_int
        function.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_int]
        function.argtypes += [ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double)]
    return lib


def measure(kernel: str, size: int, threads: int, reps: int = 10) -> Bandwidth:
    """``kernel`` ("read" or "triad") over ``size`` bytes of array (each array, for the triad)."""
    lib = _library()
    seconds = (ctypes.c_double * reps)()
    sink = ctypes.c_double()
    if kernel == "read":
        moved = size // 4 * 4
        status = lib.read_sweep(size // 4, threads, reps, seconds, ctypes.byref(sink))
    elif kernel == "triad":
        moved = size // 8 * 8 * 3  # STREAM counts two arrays read and one written
        status = lib.triad(size // 8, threads, reps, seconds, ctypes.byref(sink))
    else:
        raise ValueError(f"unknown kernel {kernel!r}")
    if status != 0:
        raise MemoryError(f"could not allocate {size} bytes for the {kernel} sweep")
    times = list(seconds)
    best, median = min(times), statistics.median(times)
    return Bandwidth(kernel, threads, moved, moved / best / 1e9, moved / median / 1e9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default=f"1,{os.cpu_count() or 1}")
    parser.add_argument("--sizes-mib", default="1,8,24,64,1024", help="read sweep sizes")
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()}")
    for threads in sorted({int(t) for t in args.threads.split(",")}):
        for mib in (int(m) for m in args.sizes_mib.split(",")):
            row = measure("read", mib << 20, threads, args.reps)
            print(
                f"read  {mib:>5} MiB  {threads} threads  best {row.best_gb_s:6.1f} GB/s"
                f"  median {row.median_gb_s:6.1f}"
            )
        row = measure("triad", DRAM_BYTES // 4, threads, args.reps)
        print(
            f"triad 3x{DRAM_BYTES >> 22} MiB {threads} threads  best {row.best_gb_s:6.1f} GB/s"
            f"  median {row.median_gb_s:6.1f}"
        )


if __name__ == "__main__":
    main()
