"""Output tokens/s of the bundled engine vs transformers static batches vs llama.cpp.

The workload: N requests with random token ids (fixed seed 0), prompt lengths uniform in
32-512, output lengths uniform in 32-256, end tokens ignored so every request generates exactly
its output length. Greedy everywhere. The engine runs once per weight choice (``--weights``,
default all of float32, bfloat16, int8 and int4). Run by hand, e.g.:

    PYTHONPATH=. python bench/engine_throughput.py --quick
    PYTHONPATH=. python bench/engine_throughput.py            # 64 requests, takes a while on CPU
    PYTHONPATH=. python bench/engine_throughput.py --weights int8,int4 --skip transformers

The peers: transformers ``generate`` in static left-padded batches, at each of
``--hf-dtypes`` and ``--hf-batch-sizes`` (the best batch size of each dtype is the peer),
llama-cpp-python one request at a time, and llama.cpp batched (``llama-server`` with a slot per
request; built on first use from the installed binding's vendored sources, which takes a while:
see ``bench/llama_server_build.py``). The last lines give each engine choice's ratio to
transformers at the same precision and to llama-server.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Workload:
    prompts: list[list[int]]
    output_lens: list[int]

    @property
    def output_tokens(self) -> int:
        return sum(self.output_lens)


@dataclass
class Row:
    system: str
    seconds: float
    output_tokens: int
    note: str = ""

    @property
    def tokens_per_second(self) -> float:
        return self.output_tokens / self.seconds


def make_workload(
    n: int, prompt_range: tuple[int, int], output_range: tuple[int, int], vocab: int
) -> Workload:
    """Random token ids; ids below 100 are left out so no control token lands in a prompt."""
    rng = random.Random(0)
    prompts, outputs = [], []
    for _ in range(n):
        prompts.append([rng.randrange(100, vocab) for _ in range(rng.randint(*prompt_range))])
        outputs.append(rng.randint(*output_range))
    return Workload(prompts, outputs)


def run_engine(
    path: Path, work: Workload, args: argparse.Namespace, weights: str | None = None
) -> tuple[Row, float]:

    from backends.engine.core.engine_config import EngineConfig
    from backends.engine.core.llm_engine import LLMEngine
    from backends.engine.core.params import SamplingParams
    from backends.engine.model.model_runner import ModelRunner

    config = EngineConfig(
        path,
        device=args.device,
        dtype=args.dtype or None,
        kv_cache_bytes=args.kv_cache_bytes,
        block_size=args.block_size,
        weights=weights,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        enable_prefix_caching=True,
        record_kv_usage=True,
    )
    runner = ModelRunner(config)
    engine = LLMEngine(runner, config)
    # The first forward passes of a process are slow (allocator, kernel setup): warm up first.
    warm = [[1000 + i % 5000 for i in range(n)] for n in (512, 64, 300)]
    engine.generate(warm, SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True))
    engine = LLMEngine(runner, config)  # fresh: the measured run starts with an empty prefix cache
    engine.kv_usage.clear()
    params = [
        SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True) for n in work.output_lens
    ]
    start = time.perf_counter()
    results = engine.generate(work.prompts, params)
    seconds = time.perf_counter() - start
    produced = [r.completion_tokens for r in results]
    if produced != work.output_lens:
        raise SystemExit(f"engine produced {produced}, expected {work.output_lens}")
    note = f"{engine.num_steps} steps, {engine.num_preemptions} preemptions"
    note += f", {runner.num_blocks} blocks of {runner.block_size}, KV {runner.kv_dtype}"
    runner.close()
    row = Row(f"clawloop engine {runner.weights}", seconds, work.output_tokens, note)
    return row, statistics.fmean(engine.kv_usage)


def run_transformers(path: Path, work: Workload, batch_size: int, dtype_name: str) -> Row:
    import torch
    from transformers import AutoModelForCausalLM

    dtype = getattr(torch, dtype_name)
    if path.is_dir():
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    else:
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=dtype)
    model.eval()
    pad = 0
    with torch.inference_mode():
        model.generate(
            torch.tensor([[1000, 1001]]), max_new_tokens=2, do_sample=False, pad_token_id=pad
        )
        start = time.perf_counter()
        for first in range(0, len(work.prompts), batch_size):
            prompts = work.prompts[first : first + batch_size]
            longest = max(len(p) for p in prompts)
            ids = torch.tensor([[pad] * (longest - len(p)) + p for p in prompts])  # left padding
            mask = torch.tensor([[0] * (longest - len(p)) + [1] * len(p) for p in prompts])
            new = max(
                work.output_lens[first : first + batch_size]
            )  # a static batch runs to its longest
            model.generate(
                ids,
                attention_mask=mask,
                max_new_tokens=new,
                min_new_tokens=new,
                do_sample=False,
                pad_token_id=pad,
            )
        seconds = time.perf_counter() - start
    return Row(
        f"transformers {dtype_name}",
        seconds,
        work.output_tokens,
        f"generate, static batches of {batch_size}, left-padded",
    )


def run_llama_cpp(path: Path, work: Workload) -> Row:
    """llama.cpp in a child process: a llama.cpp build for another CPU dies of SIGILL, not us."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    child = context.Process(target=_llama_cpp_child, args=(path, work, results))
    child.start()
    child.join()
    if child.exitcode != 0:
        return Row("llama-cpp-python", math.nan, work.output_tokens, f"died, exit {child.exitcode}")
    return Row("llama-cpp-python", results.get(), work.output_tokens, "one request at a time")


def _llama_cpp_child(path: Path, work: Workload, results: Any) -> None:
    from backends.llamacpp.backend import default_extra_buffers, load_llama

    # The same loader the llamacpp backend uses (AMX buffers off where the CPU faults on them).
    llama = load_llama(path, n_ctx=1024, threads=2, extra_buffers=default_extra_buffers()).llm
    for _ in zip(range(2), llama.generate([1000, 1001], temp=0.0, reset=True), strict=False):
        pass  # warm-up
    start = time.perf_counter()
    for prompt, n in zip(work.prompts, work.output_lens, strict=True):
        for produced, _token in enumerate(llama.generate(prompt, temp=0.0, reset=True), 1):
            if produced == n:
                break
    results.put(time.perf_counter() - start)


def run_llama_server(path: Path, work: Workload, binary: str | None) -> Row:
    """llama.cpp batched: ``llama-server`` with one slot per request and continuous batching.

    Built from the llama.cpp sources vendored in the llama-cpp-python sdist
    (``bench/llama_server_build.py`` says how, and caches the binary). Every request is sent at
    once to its native ``/completion`` endpoint as token ids, greedy, end tokens ignored, with
    no prompt cache (the prompts share nothing).
    """
    import asyncio

    import httpx
    from llama_server_build import build
    from serve_load import ServerProcess, free_port

    parallel = len(work.prompts)
    per_slot = max(len(p) for p in work.prompts) + max(work.output_lens) + 16
    port = free_port()
    command = [str(Path(binary) if binary else build()), "-m", str(path), "--port", str(port)]
    command += ["--parallel", str(parallel), "-c", str(per_slot * parallel), "-t", "2"]
    command += ["--no-webui"]
    from backends.llamacpp.backend import default_extra_buffers

    if not default_extra_buffers():
        # As for llama-cpp-python: on a CPU that advertises AMX, llama.cpp's AMX buffers (weight
        # repacking) crash it in some virtual machines (seen here: a segfault at the first batch).
        command += ["--no-repack"]

    async def one(client: httpx.AsyncClient, prompt: list[int], n: int) -> int:
        body = {"prompt": prompt, "n_predict": n, "temperature": 0.0, "ignore_eos": True}
        body["cache_prompt"] = False
        reply = await client.post(f"http://127.0.0.1:{port}/completion", json=body)
        reply.raise_for_status()
        return int(reply.json()["tokens_predicted"])

    async def everything() -> tuple[float, list[int]]:
        async with httpx.AsyncClient(timeout=3600) as client:
            await one(client, [1000, 1001], 2)  # warm-up
            start = time.perf_counter()
            jobs = [one(client, p, n) for p, n in zip(work.prompts, work.output_lens, strict=True)]
            produced = await asyncio.gather(*jobs)
            return time.perf_counter() - start, list(produced)

    with ServerProcess("llama-server", command, port, dict(os.environ)):
        seconds, produced = asyncio.run(everything())
    if produced != work.output_lens:
        raise SystemExit(f"llama-server produced {produced}, expected {work.output_lens}")
    note = f"llama.cpp batched: --parallel {parallel}, continuous batching, 2 threads"
    return Row("llama-server", seconds, work.output_tokens, note)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", help="a .gguf file or Hugging Face folder (default: the bundled model)"
    )
    parser.add_argument("--num-requests", type=int, default=64)
    parser.add_argument(
        "--quick", action="store_true", help="8 short requests: checks that it all runs"
    )
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    parser.add_argument(
        "--dtype",
        choices=["float32", "bfloat16", "float16"],
        default=None,
        help="engine weights and KV cache (default: float32 on CPU, bfloat16 on CUDA)",
    )
    parser.add_argument(
        "--weights",
        default="float32,bfloat16,int8,int4",
        help="comma-separated engine weight choices, each run in turn",
    )
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--kv-cache-bytes", type=int, default=None)
    parser.add_argument("--max-num-seqs", type=int, default=64)
    parser.add_argument("--max-num-batched-tokens", type=int, default=1024)
    parser.add_argument(
        "--hf-batch-sizes",
        default="16,64",
        help="comma-separated transformers batch sizes, each run (its best is the peer)",
    )
    parser.add_argument(
        "--hf-dtypes", default="float32,bfloat16", help="comma-separated transformers dtypes"
    )
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=["transformers", "llamacpp", "llama-server"],
    )
    parser.add_argument("--llama-server", default=None, help="a llama-server binary to use")
    parser.add_argument("--json", type=Path, help="also write every row's figures here")
    args = parser.parse_args()

    import torch
    from rich.console import Console
    from rich.table import Table

    from backends.engine.config import read_config
    from backends.gguf.default_model import default_model_path

    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    path = Path(args.model).expanduser() if args.model else default_model_path()
    vocab = min(read_config(path).vocab_size, 32000)
    if args.quick:
        work = make_workload(8, (16, 64), (8, 32), vocab)
    else:
        work = make_workload(args.num_requests, (32, 512), (32, 256), vocab)
    prompt_tokens = sum(len(p) for p in work.prompts)
    print(
        f"{len(work.prompts)} requests: {prompt_tokens} prompt, {work.output_tokens} output tokens"
    )

    rows: list[Row] = []

    def done(row: Row) -> None:  # each result as soon as it is in: a long run may be cut short
        rows.append(row)
        print(f"{row.system}: {row.output_tokens} tokens in {row.seconds:.1f} s", flush=True)

    engine_rows, kv_usage = [], {}
    for weights in args.weights.split(","):
        engine_row, kv_usage[weights] = run_engine(path, work, args, weights)
        engine_rows.append(engine_row)
        done(engine_row)
    best = max(engine_rows, key=lambda r: r.tokens_per_second)
    best_hf: dict[str, Row] = {}
    if "transformers" not in args.skip:
        for dtype_name in args.hf_dtypes.split(","):
            for size in args.hf_batch_sizes.split(","):
                row = run_transformers(path, work, int(size), dtype_name)
                done(row)
                if dtype_name not in best_hf or row.seconds < best_hf[dtype_name].seconds:
                    best_hf[dtype_name] = row
    if "llamacpp" not in args.skip and path.is_file():
        done(run_llama_cpp(path, work))
    if "llama-server" not in args.skip and path.is_file():
        done(run_llama_server(path, work, args.llama_server))

    table = Table(
        title=f"Output throughput, {path.name}, {args.device}, {torch.get_num_threads()} threads"
    )
    for column in ("system", "seconds", "output tok/s", "best engine speed-up", "notes"):
        table.add_column(column, justify="left" if column in ("system", "notes") else "right")
    for row in rows:
        if math.isnan(row.seconds):
            table.add_row(row.system, "-", "-", "-", row.note)
            continue
        ratio = best.tokens_per_second / row.tokens_per_second
        speeds = (f"{row.seconds:.1f}", f"{row.tokens_per_second:.1f}", f"{ratio:.2f}x")
        table.add_row(row.system, *speeds, row.note)
    console = Console(width=120)
    console.print(table)
    for weights, usage in kv_usage.items():
        console.print(
            f"engine {weights} KV-cache use (token slots holding tokens / held, step mean):"
            f" {usage:.1%}"
        )
    _print_matched(console, engine_rows, best_hf, rows)
    if args.json:
        _write_json(args.json, work, args.device, rows, kv_usage)


def _write_json(
    path: Path, work: Workload, device: str, rows: list[Row], kv_usage: dict[str, float]
) -> None:
    figures = {
        "device": device,
        "requests": len(work.prompts),
        "prompt_tokens": sum(len(p) for p in work.prompts),
        "output_tokens": work.output_tokens,
        "rows": [
            {
                "system": row.system,
                "seconds": None if math.isnan(row.seconds) else row.seconds,
                "output_tok_s": None if math.isnan(row.seconds) else row.tokens_per_second,
                "note": row.note,
            }
            for row in rows
        ],
        "kv_usage": kv_usage,
    }
    path.write_text(json.dumps(figures, indent=2))


def _print_matched(
    console: Any, engine: list[Row], best_hf: dict[str, Row], rows: list[Row]
) -> None:
    """The goals' ratios: each engine choice against transformers at the same precision (its
    best batch size), and against llama.cpp batched."""
    server = next((r for r in rows if r.system == "llama-server"), None)
    for row in engine:
        weights = row.system.removeprefix("clawloop engine ")
        parts = []
        if weights in best_hf:
            peer = best_hf[weights]
            parts.append(
                f"{row.tokens_per_second / peer.tokens_per_second:.2f}x transformers {weights}"
                f" ({peer.note})"
            )
        if server is not None and not math.isnan(server.seconds):
            parts.append(f"{row.tokens_per_second / server.tokens_per_second:.2f}x llama-server")
        if parts:
            console.print(f"engine {weights}: " + ", ".join(parts))


if __name__ == "__main__":
    main()
