"""What the sandbox adds to one shell call: bubblewrap vs. a bare subprocess, side by side.

Usage: PYTHONPATH=. python bench/sandbox_overhead.py [--runs 50]
Each row runs ``bash -c true`` (the shell tool's shape) ``--runs`` times after a warm-up and
prints the median and 90th percentile wall time per call.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sandbox.runner import SandboxRunner
from sandbox.settings import SandboxSettings

ARGV = ["bash", "-c", "true"]


def measure(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median and p90 seconds per call."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    times.sort()
    return statistics.median(times), times[int(0.9 * (len(times) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        bwrap = SandboxRunner(SandboxSettings(), ws)
        bwrap.check()
        off = SandboxRunner(SandboxSettings(backend="off"), ws)
        rows = [
            ("bare subprocess.run", lambda: subprocess.run(ARGV, cwd=ws, capture_output=True)),
            ("runner, backend off", lambda: off.run(ARGV)),
            ("runner, bubblewrap", lambda: bwrap.run(ARGV)),
        ]
        results = {name: measure(fn, args.runs) for name, fn in rows}
    bare = results["bare subprocess.run"][0]
    print(f"{'per call (' + str(args.runs) + ' runs)':<24}{'median':>10}{'p90':>10}{'added':>10}")
    for name, (median, p90) in results.items():
        print(f"{name:<24}{median * 1e3:>8.1f}ms{p90 * 1e3:>8.1f}ms{(median - bare) * 1e3:>8.1f}ms")


if __name__ == "__main__":
    main()
