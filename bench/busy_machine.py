"""`agent run` on a busy machine: OpenMP's spin bounded (clawloop's default) against GNU's own.

Both local backends run each decode step on OpenMP threads that meet at a barrier after every
operation. GNU OpenMP lets a thread that reaches a barrier first spin 300,000 rounds before it
sleeps; clawloop sets ``GOMP_SPINCOUNT=1000`` at start (``agent.host.bound_spin_waits``). This
runs the task of ``agent_run.py`` (two model calls: a tool call, then the answer), each run a
fresh ``agent run`` process, on an idle machine and with ``--busy`` other processes each holding
a core (a Python busy loop), once as clawloop starts (``GOMP_SPINCOUNT`` unset, so 1,000) and
once with ``GOMP_SPINCOUNT=300000`` (GNU OpenMP's default here). Each arm starts with one
untimed run (the engine's resident host is stopped between arms, so each arm's host starts
with that arm's environment), then reports the median and range of ``--runs`` wall times.

    python bench/busy_machine.py                       # both backends, one busy core
    python bench/busy_machine.py --backend llamacpp --runs 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agent_run import TASK, one_run, scratch, stop_engine

GNU_DEFAULT = "300000"


@contextmanager
def busy(cores: int) -> Iterator[None]:
    """``cores`` processes that each keep one core busy until the block ends."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def arm(
    backend: str, spin: str | None, runs: int, workspace: Path, env: dict[str, str]
) -> list[float]:
    """Wall seconds of ``runs`` timed runs after an untimed one, with the given spin."""
    env = dict(env)
    env.pop("GOMP_SPINCOUNT", None)
    if spin is not None:
        env["GOMP_SPINCOUNT"] = spin
    stop_engine(env)
    one_run(backend, TASK, workspace, env)
    return [float(one_run(backend, TASK, workspace, env)["wall"]) for _ in range(runs)]  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", action="append", choices=["llamacpp", "engine"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--busy", type=int, default=1, help="cores kept busy (default 1)")
    args = parser.parse_args()
    backends = args.backend or ["llamacpp", "engine"]
    with tempfile.TemporaryDirectory() as tmp:
        workspace, env = scratch(Path(tmp))
        env.pop("OMP_WAIT_POLICY", None)
        print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()}; task {TASK!r}")
        print("| backend | machine | GOMP_SPINCOUNT | wall s, median (range) |")
        print("|---|---|---|---|")
        try:
            for backend in backends:
                for cores in (0, args.busy):
                    state = f"{cores} core(s) busy" if cores else "idle"
                    for spin, label in (
                        (None, "unset (clawloop: 1000)"),
                        (GNU_DEFAULT, GNU_DEFAULT),
                    ):
                        with busy(cores):
                            walls = arm(backend, spin, args.runs, workspace, env)
                        print(
                            f"| {backend} | {state} | {label} | {statistics.median(walls):.2f}"
                            f" ({min(walls):.2f}-{max(walls):.2f}) |",
                            flush=True,
                        )
        finally:
            stop_engine(env)
        print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
