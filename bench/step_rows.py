"""What a step of one sequence costs by the number of token rows it computes.

A verification step computes the last token and its drafts (and forced text) as one chunk of
rows; how much each row beyond the first costs decides how long a draft may usefully be. One
sequence's prompt (random tokens, ``--context`` of them) is computed first; then steps of each
row count in ``--rows`` run over the same positions after it, rotating through the counts
``--repeat`` times, and the median of each is printed with its ratio to the first count and its
cost per row beyond the first. Only the last row gets logits, as in a plain step. Run by hand:

    PYTHONPATH=. python bench/step_rows.py [--context 900] [--rows 1 2 4 8 12 16] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--context", type=int, default=900)
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 8, 12, 16])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--weights", default=None, help="the engine's weights (default: its own)")
    args = parser.parse_args()

    import torch

    from backends.engine.core.batch import StepBatch
    from backends.engine.core.engine_config import EngineConfig
    from backends.engine.core.params import SamplingParams
    from backends.engine.model.model_runner import ModelRunner
    from backends.gguf.default_model import default_model_path

    torch.set_num_threads(args.threads)
    config = EngineConfig(default_model_path(), kv_cache_bytes=64 << 20, weights=args.weights)
    runner = ModelRunner(config)
    size = runner.block_size
    rng = random.Random(0)
    tokens = [rng.randrange(1000, 20000) for _ in range(args.context + max(args.rows))]
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

    for start in range(0, args.context, 256):
        step(start, min(256, args.context - start))
    times: dict[int, list[float]] = {n: [] for n in args.rows}
    for _ in range(args.repeat):
        for count in args.rows:
            began = time.perf_counter()
            step(args.context, count)
            times[count].append(time.perf_counter() - began)
    runner.close()
    first = args.rows[0]
    base = statistics.median(times[first])
    print(f"one sequence after {args.context} tokens, {args.threads} threads, {runner.weights}")
    for count in args.rows:
        median = statistics.median(times[count])
        extra = (median - base) / (count - first) if count != first else 0.0
        print(
            f"  {count:3d} rows: {median * 1e3:7.2f} ms   {median / base:4.2f}x"
            f"   {extra * 1e3:5.2f} ms per row beyond {first}"
        )


if __name__ == "__main__":
    main()
