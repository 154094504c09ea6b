"""What a step of one sequence costs by the number of token rows it computes.

A verification step computes the last token and its drafts (and forced text) as one chunk of
rows; how much each row beyond the first costs decides how long a draft may usefully be. One
sequence's prompt (random tokens, ``--context`` of them) is computed first; then steps of each
row count in ``--rows`` run over the same positions after it, rotating through the counts
``--repeat`` times, and the median of each is printed with its ratio to the first count and its
cost per row beyond the first. Only the last row gets logits, as in a plain step.
``--backend llamacpp`` times llama-cpp-python's ``eval`` of that many tokens instead (what
feeding a run of forced or drafted tokens in one call would cost there). Run by hand:

    PYTHONPATH=. python bench/step_rows.py [--context 900] [--rows 1 2 4 8 12 16] [--threads 2]
    PYTHONPATH=. python bench/step_rows.py --backend llamacpp
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Callable
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--context", type=int, default=900)
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 8, 12, 16])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--weights", default=None, help="the engine's weights (default: its own)")
    parser.add_argument("--backend", choices=["engine", "llamacpp"], default="engine")
    args = parser.parse_args()
    rng = random.Random(0)
    tokens = [rng.randrange(1000, 20000) for _ in range(args.context + max(args.rows))]
    if args.backend == "llamacpp":
        step, close, label = _llama_cpp(tokens, args.threads)
    else:
        step, close, label = _engine(tokens, args.weights, args.threads)
    for start in range(0, args.context, 256):
        step(start, min(256, args.context - start))
    times: dict[int, list[float]] = {n: [] for n in args.rows}
    for _ in range(args.repeat):
        for count in args.rows:
            began = time.perf_counter()
            step(args.context, count)
            times[count].append(time.perf_counter() - began)
    close()
    first = args.rows[0]
    base = statistics.median(times[first])
    print(f"one sequence after {args.context} tokens, {args.threads} threads, {label}")
    for count in args.rows:
        median = statistics.median(times[count])
        extra = (median - base) / (count - first) if count != first else 0.0
        print(
            f"  {count:3d} rows: {median * 1e3:7.2f} ms   {median / base:4.2f}x"
            f"   {extra * 1e3:5.2f} ms per row beyond {first}"
        )


Step = Callable[[int, int], None]


def _engine(tokens: list[int], weights: str | None, threads: int) -> tuple[Step, Any, str]:
    """A step of the bundled engine: ``count`` tokens from ``start``, logits for the last."""
    import torch

    from backends.engine.core.batch import StepBatch
    from backends.engine.core.engine_config import EngineConfig
    from backends.engine.core.params import SamplingParams
    from backends.engine.model.model_runner import ModelRunner
    from backends.gguf.default_model import default_model_path

    torch.set_num_threads(threads)
    config = EngineConfig(default_model_path(), kv_cache_bytes=64 << 20, weights=weights)
    runner = ModelRunner(config)
    size = runner.block_size
    blocks = list(range(len(tokens) // size + 1))
    greedy = SamplingParams(temperature=0.0)

    def step(start: int, count: int) -> None:
        positions = list(range(start, start + count))
        batch = StepBatch(
            seq_ids=[0],
            input_ids=tokens[start : start + count],
            positions=positions,
            query_lens=[count],
            context_lens=[start + count],
            block_tables=[blocks],
            slot_mapping=[blocks[p // size] * size + p % size for p in positions],
            sample_indices=[0],
            sampling=[greedy],
            output_counts=[0],
            constraints=[None],
        )
        runner.execute(batch)

    return step, runner.close, f"engine {runner.weights}"


def _llama_cpp(tokens: list[int], threads: int) -> tuple[Step, Any, str]:
    """llama-cpp-python's ``eval`` of ``count`` tokens from ``start`` (its cache cut back)."""
    from backends.gguf.default_model import default_model_path
    from backends.llamacpp.backend import default_extra_buffers, load_llama

    path = default_model_path()
    llm = load_llama(path, n_ctx=2048, threads=threads, extra_buffers=default_extra_buffers()).llm

    def step(start: int, count: int) -> None:
        llm._ctx.kv_cache_seq_rm(-1, start, -1)  # as the backend cuts a reused prefix back
        llm.n_tokens = start
        llm.eval(tokens[start : start + count])

    return step, lambda: None, f"llama-cpp-python, {path.name}"


if __name__ == "__main__":
    main()
