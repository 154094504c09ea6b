"""One sequence, side by side: the engine at each weight choice, llama-cpp-python, transformers.

The workload: one prompt of 1,000 random token ids (seed 0), 256 new tokens, greedy, end tokens
ignored. Measured for each system: prefill time (prompt in to first new token out) and decode
tok/s (the other 255 tokens over the time after the first), plus the resident memory of the
process once the model is loaded (each system runs in its own child process, so the figures do
not mix). llama-cpp-python runs the same GGUF (the bundled one is 4-bit) with n_threads = the
core count and with 1 thread; transformers runs it dequantized to float32. Run by hand:

    nice -n 10 python bench/single_stream.py                     # engine at 1 thread
    nice -n 10 python bench/single_stream.py --engine-threads 1,2 --skip transformers
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WEIGHTS = ("float32", "int4-decode", "bfloat16", "int8", "int4")


@dataclass
class Row:
    system: str
    threads: int
    prefill_s: float
    decode_tok_s: float
    rss_mib: float


def make_prompt(length: int) -> list[int]:
    """Random ids above 100, so no control token lands in the prompt."""
    rng = random.Random(0)
    return [rng.randrange(100, 32000) for _ in range(length)]


def _rss_mib() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def engine_child(path: Path, weights: str, threads: int, prompt: list[int], new: int) -> Row:
    import torch

    from backends.engine.core.engine_config import EngineConfig
    from backends.engine.core.llm_engine import LLMEngine
    from backends.engine.core.params import SamplingParams
    from backends.engine.model.model_runner import ModelRunner

    torch.set_num_threads(threads)
    runner = ModelRunner(EngineConfig(path, kv_cache_bytes=256 << 20, weights=weights))
    rss = _rss_mib()
    params = SamplingParams(temperature=0.0, max_tokens=new, ignore_eos=True)
    LLMEngine(runner).generate([prompt[::-1][:200]], SamplingParams(temperature=0.0, max_tokens=4))
    engine = LLMEngine(runner)  # fresh: nothing of the prompt is in its prefix cache
    start = time.perf_counter()
    engine.add_request(prompt, params)
    first, produced = 0.0, 0
    while engine.has_unfinished():
        for out in engine.step():
            if produced == 0 and out.delta.token_ids:
                first = time.perf_counter()
            produced += len(out.delta.token_ids)
    end = time.perf_counter()
    if produced != new:
        raise SystemExit(f"engine produced {produced} tokens, expected {new}")
    return Row(f"engine {weights}", threads, first - start, (new - 1) / (end - first), rss)


def llama_cpp_child(path: Path, threads: int, prompt: list[int], new: int) -> Row:
    from backends.llamacpp.backend import default_extra_buffers, load_llama

    llama = load_llama(path, n_ctx=2048, threads=threads, extra_buffers=default_extra_buffers()).llm
    rss = _rss_mib()
    for _ in zip(range(4), llama.generate(prompt[::-1][:200], temp=0.0, reset=True), strict=False):
        pass  # warm-up
    start = time.perf_counter()
    first = 0.0
    for produced, _token in enumerate(llama.generate(prompt, temp=0.0, reset=True), 1):
        if produced == 1:
            first = time.perf_counter()
        if produced == new:
            break
    end = time.perf_counter()
    return Row("llama-cpp-python", threads, first - start, (new - 1) / (end - first), rss)


def transformers_child(path: Path, threads: int, prompt: list[int], new: int) -> Row:
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.generation.streamers import BaseStreamer

    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32
    ).eval()
    rss = _rss_mib()

    class Clock(BaseStreamer):  # type: ignore[misc]
        """Times the first new token: put() gets the prompt first, then each new token."""

        def __init__(self) -> None:
            self.calls: list[float] = []

        def put(self, value: Any) -> None:
            self.calls.append(time.perf_counter())

        def end(self) -> None:
            pass

    with torch.inference_mode():
        model.generate(torch.tensor([prompt[:200]]), max_new_tokens=4, do_sample=False)
        clock = Clock()
        start = time.perf_counter()
        model.generate(
            torch.tensor([prompt]),
            max_new_tokens=new,
            min_new_tokens=new,
            do_sample=False,
            streamer=clock,
        )
        end = time.perf_counter()
    first = clock.calls[1]
    return Row("transformers float32", threads, first - start, (new - 1) / (end - first), rss)


def _child(target: Any, args: tuple[Any, ...], results: Any) -> None:
    results.put(target(*args))


def run(target: Any, *args: Any) -> Row | None:
    """``target`` in a spawned child: a llama.cpp build for another CPU dies of SIGILL, not us."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    child = context.Process(target=_child, args=(target, args, results))
    child.start()
    row = results.get() if child.join() is None and child.exitcode == 0 else None
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a .gguf file (default: the bundled model)")
    parser.add_argument("--prompt-tokens", type=int, default=1000)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--weights", default=",".join(WEIGHTS), help="engine choices to run")
    parser.add_argument("--engine-threads", default="1", help="comma-separated thread counts")
    parser.add_argument("--skip", action="append", default=[], choices=["transformers", "llamacpp"])
    args = parser.parse_args()

    from backends.gguf.default_model import default_model_path

    path = Path(args.model).expanduser() if args.model else default_model_path()
    prompt = make_prompt(args.prompt_tokens)
    cores = os.cpu_count() or 1
    print(f"{path.name}: prompt {len(prompt)} tokens, {args.new_tokens} new, {cores} cores")
    print(f"load average at start {os.getloadavg()}")
    jobs: list[tuple[Any, tuple[Any, ...]]] = []
    for threads in (int(t) for t in args.engine_threads.split(",")):
        for weights in args.weights.split(","):
            jobs.append((engine_child, (path, weights, threads, prompt, args.new_tokens)))
    if "llamacpp" not in args.skip:
        for threads in sorted({cores, 1}, reverse=True):
            jobs.append((llama_cpp_child, (path, threads, prompt, args.new_tokens)))
    if "transformers" not in args.skip:
        jobs.append((transformers_child, (path, cores, prompt, args.new_tokens)))
    header = f"{'system':<22} {'threads':>7} {'prefill s':>9} {'decode tok/s':>12} {'RSS MiB':>8}"
    print(header, flush=True)
    for target, job_args in jobs:
        row = run(target, *job_args)
        if row is None:
            print(f"{target.__name__} {job_args[1:-2]}: the child process failed", flush=True)
            continue
        print(
            f"{row.system:<22} {row.threads:>7} {row.prefill_s:>9.2f} {row.decode_tok_s:>12.1f}"
            f" {row.rss_mib:>8.0f}   load {os.getloadavg()[0]:.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
