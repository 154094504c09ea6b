"""Tasks per minute of `agent eval` on the bundled engine, one task at a time and eight at once.

With ``--jobs 8`` eight tasks run through the real loop, skills and sandbox at the same time,
and their model calls share the engine's continuous batches; with ``--jobs 1`` each call runs
alone. Both runs use the same suite, the same greedy settings and a fresh engine (warmed up on
one task first), so the difference is the batching. Run by hand:

    PYTHONPATH=. python bench/eval_throughput.py [--suite evals/basic.yaml] [--jobs 1 8]

It prints, per setting, the wall time, tasks per minute and the pass count (which must not
change with the number of jobs: greedy decoding is the same alone and in a batch).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", type=Path, default=Path("evals/basic.yaml"))
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--tasks", type=int, default=0, help="only the first N tasks (0: all)")
    args = parser.parse_args()
    os.environ.setdefault("CLAWLOOP_DATA_DIR", tempfile.mkdtemp(prefix="clawloop-bench-"))

    from cli.config import load_settings
    from cli.evals.runner import Variant, run_suite
    from cli.evals.suite import load_suite
    from cli.wiring import build_backend

    suite = load_suite(args.suite)
    if args.tasks:
        suite.tasks = suite.tasks[: args.tasks]
    settings = load_settings({"backend": "engine", "decoding.temperature": 0.0})
    backend = build_backend(settings)
    warm = suite.model_copy(update={"tasks": suite.tasks[:1]})
    run_suite(warm, [Variant("warm-up", settings, backend)])
    print(f"suite {suite.name}: {len(suite.tasks)} tasks, backend {backend.name}")
    for jobs in args.jobs:
        variant = Variant(f"jobs={jobs}", settings, backend)
        began = time.monotonic()
        run_suite(suite, [variant], jobs=jobs)
        seconds = time.monotonic() - began
        passed = sum(r.passed for r in variant.results)
        rate = len(variant.results) / seconds * 60
        print(
            f"--jobs {jobs}: {seconds:6.1f} s, {rate:5.1f} tasks/min, "
            f"passed {passed}/{len(variant.results)}",
            flush=True,
        )


if __name__ == "__main__":
    main()
