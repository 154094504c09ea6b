"""OpenMP's spin at a barrier is bounded before any runtime loads (agent.host.bound_spin_waits).

A real OpenMP program, compiled here with the system C compiler, shows what the setting does: a
thread left waiting at a barrier for 300 ms gives its core back instead of spinning through
it. The entry points set it before anything loads an OpenMP runtime: `agent` itself, and
llama.cpp's import for code that uses the backend without the command.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

from agent.host import SPIN_ROUNDS, bound_spin_waits, c_compiler

ROOT = Path(__file__).resolve().parent.parent

# Thread 0 sleeps 300 ms inside a parallel region; thread 1 reaches the region's closing
# barrier at once and waits there. The program prints the process's CPU milliseconds over
# that region: the waiting thread's spin (the sleep costs none): about 5-9 ms with GNU OpenMP's
# default on a 2-core Xeon, 0.1-0.2 ms with the bound.
WAITER = r"""
#include <omp.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static double cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(void) {
#pragma omp parallel num_threads(2)
    { (void)omp_get_thread_num(); } /* the team's threads are created here, outside the count */
    const double start = cpu_ms();
#pragma omp parallel num_threads(2)
    {
        if (omp_get_thread_num() == 0) usleep(300000);
    }
    printf("%.1f\n", cpu_ms() - start);
    return 0;
}
"""


def _clean_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("GOMP_SPINCOUNT", None)
    env.pop("OMP_WAIT_POLICY", None)
    return env


def test_the_spin_is_bounded_unless_the_user_chose_how_openmp_waits() -> None:
    env = {"PATH": "/usr/bin"}
    assert bound_spin_waits(env)
    assert env["GOMP_SPINCOUNT"] == SPIN_ROUNDS == "1000"
    mine = {"GOMP_SPINCOUNT": "50000"}
    assert not bound_spin_waits(mine)
    assert mine == {"GOMP_SPINCOUNT": "50000"}
    policy = {"OMP_WAIT_POLICY": "active"}
    assert not bound_spin_waits(policy)
    assert "GOMP_SPINCOUNT" not in policy


def test_a_thread_waiting_at_a_barrier_gives_its_core_back(tmp_path: Path) -> None:
    compiler = c_compiler()
    assert compiler is not None, "the tests need a C compiler (gcc: see .ci/run)"
    (tmp_path / "waiter.c").write_text(WAITER)
    program = tmp_path / "waiter"
    subprocess.run(
        [compiler, "-O1", "-fopenmp", str(tmp_path / "waiter.c"), "-o", str(program)],
        check=True,
        capture_output=True,
    )

    def cpu_ms(env: dict[str, str]) -> float:
        times = []
        for _ in range(3):
            done = subprocess.run(
                [str(program)], env=env, capture_output=True, text=True, check=True
            )
            times.append(float(done.stdout))
        return statistics.median(times)

    gnu = cpu_ms(_clean_env())  # GNU OpenMP's own: 300,000 rounds before it sleeps
    bounded = _clean_env()
    assert bound_spin_waits(bounded)
    ours = cpu_ms(bounded)
    assert gnu > 1.0, f"GNU's default spins through part of the wait ({gnu} ms): the control"
    assert ours < gnu / 4, (ours, gnu)


def test_the_agent_command_bounds_the_spin_before_any_command_runs() -> None:
    # The Typer app is replaced by one that reports what a command would see on start.
    code = (
        "import os\n"
        "import cli.main\n"
        "cli.main.app = lambda: print(os.environ.get('GOMP_SPINCOUNT'))\n"
        "cli.main.main()\n"
    )
    assert _run(code) == [SPIN_ROUNDS]


def test_llama_cpp_is_imported_with_the_spin_bounded() -> None:
    code = (
        "import os, sys\n"
        "from backends.llamacpp.backend import _import_llama_cpp\n"
        "assert 'llama_cpp' not in sys.modules\n"
        "_import_llama_cpp()\n"
        "print(os.environ.get('GOMP_SPINCOUNT'))\n"
    )
    assert _run(code) == [SPIN_ROUNDS]


def _run(code: str) -> list[str]:
    """What ``code`` prints, run by this Python with no OpenMP setting of the user's."""
    env = {**_clean_env(), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-1500:]
    return done.stdout.split()
