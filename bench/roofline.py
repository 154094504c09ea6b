"""The engine's decode against this machine's rooflines: memory for one sequence, FLOPs for a batch.

Single stream: memory bandwidth (``memory_bandwidth.c``, the read sweep, run before and after
each decode, the best taken) over the bytes one decode step reads (``step_bytes.py``: the
loaded model's own tensors, plus the KV cache at the run's mean context) is the fastest one
sequence can decode; next to it the engine's measured
decode (``single_stream.py``'s run: 256 new tokens after a 1,000-token prompt, greedy) and
llama-cpp-python's on the same prompt against its own bytes (the GGUF's tensors, f16 cache).
A second read sweep over as many bytes as one step reads gives the rate those bytes come at
where they fit in a cache (a large shared L3 holds a small model's step): the last columns are
the roofline and share at that rate, beside the ones at the rate from memory.
Agent turns: the model calls of the first ``--agent-tasks`` tasks of evals/basic.yaml, captured
through the agent loop and replayed without drafts and with ``--speculate`` drafts per step
(speculation.py), their tokens/s against the plain-decode roofline at their own mean context:
over whole calls, and after each call's first token (decoding alone).
Batched: one step of ``--batch`` decode rows, its FLOPs against float32 GEMM's measured FLOP/s
(torch.matmul at the engine's projection shapes and that row count). Run by hand:

    PYTHONPATH=. python bench/roofline.py                          # int4 (the default), 2 threads
    PYTHONPATH=. python bench/roofline.py --weights int4,float32,bfloat16 --threads 1 --json r.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from memory_bandwidth import DRAM_BYTES, measure
from single_stream import engine_child, llama_cpp_child, make_prompt, run
from step_bytes import StepBytes, engine_step_bytes, gguf_step_bytes, projection_shapes, step_flops


def bytes_child(path: Path, weights: str, threads: int) -> tuple[StepBytes, str]:
    """The model loaded as ``weights``: what one sequence's decode step reads."""
    import torch

    from backends.engine.core.engine_config import EngineConfig
    from backends.engine.model.model_runner import ModelRunner

    torch.set_num_threads(threads)
    runner = ModelRunner(EngineConfig(path, kv_cache_bytes=64 << 20, weights=weights))
    kinds = f"KV {runner.kv_dtype}, head {type(runner.model.lm_head).__name__}"
    return engine_step_bytes(runner), kinds


def batched_child(
    path: Path, weights: str | None, threads: int, rows: int, prompt_len: int, steps: int
) -> dict[str, float]:
    """Seconds per decode step with ``rows`` sequences decoding, each after ``prompt_len``."""
    import torch

    from backends.engine.core.engine_config import EngineConfig
    from backends.engine.core.llm_engine import LLMEngine
    from backends.engine.core.params import SamplingParams
    from backends.engine.model.model_runner import ModelRunner

    torch.set_num_threads(threads)
    config = EngineConfig(path, weights=weights, max_num_seqs=rows, max_num_batched_tokens=2048)
    runner = ModelRunner(config)
    engine = LLMEngine(runner, config)
    rng = random.Random(1)
    # Long enough that none finishes while the last prompts are still being read.
    longest = steps + rows * prompt_len // 256 + 8
    params = SamplingParams(temperature=0.0, max_tokens=longest, ignore_eos=True)
    for _ in range(rows):
        engine.add_request([rng.randrange(100, 32000) for _ in range(prompt_len)], params)
    started: set[int] = set()
    while len(started) < rows:  # prompts first, until every sequence has its first token
        started |= {out.request_id for out in engine.step() if out.delta.token_ids}
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        produced = sum(len(out.delta.token_ids) for out in engine.step())
        times.append(time.perf_counter() - start)
        if produced != rows:
            raise SystemExit(f"a decode step produced {produced} tokens, expected {rows}")
    return {"step_s": statistics.median(times), "best_step_s": min(times)}


def agent_turns_child(threads: int, tasks: int, k: int, max_tokens: int) -> dict[str, Any]:
    """Agent turns (speculation.py's capture and replay, the engine as ``agent run`` builds it):
    decode tokens/s without drafts and with ``k``, and the turns' mean context."""
    import tempfile

    os.environ["CLAWLOOP_ENGINE_THREADS"] = str(threads)
    os.environ.setdefault("CLAWLOOP_DATA_DIR", tempfile.mkdtemp(prefix="clawloop-roofline-"))
    from speculation import capture, measure

    decoder, turns = capture(Path("evals/basic.yaml"), tasks)
    replay = measure(decoder, turns, [k], max_tokens)
    off, on = replay.arms
    return {
        "calls": len(turns),
        "tokens": off.tokens,
        "mean_context": replay.mean_context,
        "off_tok_s": off.tokens / off.seconds,
        "on_tok_s": on.tokens / on.seconds,
        "off_decode_tok_s": off.decode_tokens / off.decode_seconds,
        "on_decode_tok_s": on.decode_tokens / on.decode_seconds,
        "k": k,
        "greedy_identical": on.texts == off.texts,
    }


def gemm_flops(config: Any, rows: int, threads: int, repeat: int = 20) -> dict[str, float]:
    """float32 torch.matmul FLOP/s at each of the engine's projection shapes with ``rows`` rows,
    and the seconds one step's matmuls take at those speeds."""
    import torch

    torch.set_num_threads(threads)
    result: dict[str, float] = {}
    step_s = 0.0
    for name, out, cols, count in projection_shapes(config):
        x, w = torch.randn(rows, cols), torch.randn(cols, out)
        for _ in range(3):
            torch.matmul(x, w)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            torch.matmul(x, w)
            times.append(time.perf_counter() - start)
        best = min(times)
        result[f"{name}_gflop_s"] = 2 * rows * out * cols / best / 1e9
        step_s += best * count
    result["step_matmul_s"] = step_s
    return result


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a .gguf file (default: the bundled model)")
    parser.add_argument("--weights", default="int4", help="comma-separated engine choices")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--prompt-tokens", type=int, default=1000)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--batch", type=int, default=64, help="rows of the batched step")
    parser.add_argument("--batch-prompt", type=int, default=256, help="prompt of each row")
    parser.add_argument(
        "--skip", action="append", default=[], choices=["llamacpp", "batched", "agent"]
    )
    parser.add_argument("--agent-tasks", type=int, default=10, help="tasks of evals/basic.yaml")
    parser.add_argument("--speculate", type=int, default=3, help="drafts per step on agent turns")
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args()

    from backends.engine.config import read_config
    from backends.gguf.default_model import default_model_path

    path = Path(args.model).expanduser() if args.model else default_model_path()
    threads, report = args.threads, {"load_start": os.getloadavg(), "threads": args.threads}
    prompt = make_prompt(args.prompt_tokens)
    context = args.prompt_tokens + args.new_tokens / 2  # the decode's mean context
    print(f"{path.name}: {threads} threads, load average {os.getloadavg()}")

    # Bandwidth on a shared or virtual machine moves from minute to minute (twice as much
    # from one run to the next has been seen), so the read sweep runs again after each decode,
    # and the roofline takes the best of them all: the share is never flattered by a slow sweep.
    sweeps = [measure("read", DRAM_BYTES, threads)]
    triad = measure("triad", DRAM_BYTES // 4, threads)
    measured: dict[str, tuple[StepBytes, float, str]] = {}
    at_size: dict[str, float] = {}
    for weights in args.weights.split(","):
        found = run(bytes_child, path, weights, threads)
        decode = run(engine_child, path, weights, threads, prompt, args.new_tokens)
        if found is None or decode is None:
            print(f"engine {weights}: the child process failed")
            continue
        step, kinds = found
        measured[f"engine {weights}"] = (step, decode.decode_tok_s, kinds)
        at_size[f"engine {weights}"] = measure("read", step.at(round(context)), threads).best_gb_s
        sweeps.append(measure("read", DRAM_BYTES, threads))
    if "llamacpp" not in args.skip and path.suffix == ".gguf":
        decode = run(llama_cpp_child, path, threads, prompt, args.new_tokens)
        if decode is not None:
            gguf_step = gguf_step_bytes(path)
            measured["llama-cpp-python"] = (gguf_step, decode.decode_tok_s, "f16 KV")
            at_size["llama-cpp-python"] = measure(
                "read", gguf_step.at(round(context)), threads
            ).best_gb_s
            sweeps.append(measure("read", DRAM_BYTES, threads))
    best = max(sweeps, key=lambda b: b.best_gb_s)
    print(
        f"read sweep 1 GiB, {len(sweeps)} times (before, and after each decode): best"
        f" {best.best_gb_s:.1f} GB/s; each sweep's best "
        + ", ".join(f"{b.best_gb_s:.1f}" for b in sweeps)
        + f"; triad: best {triad.best_gb_s:.1f} GB/s (median {triad.median_gb_s:.1f})"
    )
    report["bandwidth"] = {"read": asdict(best), "sweeps": [asdict(b) for b in sweeps]}
    report["bandwidth"]["triad"] = asdict(triad)
    bandwidth = best.best_gb_s * 1e9
    rows: dict[str, Any] = {}
    for name, (step, tok_s, kinds) in measured.items():
        rows[name] = _row(step, tok_s, bandwidth, context, kinds)
        if name in at_size:
            at_roofline = at_size[name] * 1e9 / rows[name]["step_bytes"]
            rows[name]["read_at_step_size_gb_s"] = at_size[name]
            rows[name]["roofline_at_step_size_tok_s"] = at_roofline
            rows[name]["share_at_step_size"] = tok_s / at_roofline
    report["single_stream"] = rows
    print(
        f"\none sequence: {args.prompt_tokens}-token prompt, {args.new_tokens} new, mean"
        f" context {context:.0f}, roofline at {best.best_gb_s:.1f} GB/s"
    )
    print(
        f"{'system':<18} {'weights':>10} {'KV':>10} {'step':>10} {'roofline':>9}"
        f" {'measured':>9} {'share':>6}   {'read at step size':>17} {'roofline':>9} {'share':>6}"
    )
    for name, row in rows.items():
        at = (
            f"{row['read_at_step_size_gb_s']:>12.1f} GB/s"
            f" {row['roofline_at_step_size_tok_s']:>9.1f} {row['share_at_step_size']:>6.1%}"
            if "read_at_step_size_gb_s" in row
            else f"{'':>32}"
        )
        print(
            f"{name:<18} {_mib(row['weights_bytes']):>10} {_mib(row['kv_bytes']):>10}"
            f" {_mib(row['step_bytes']):>10} {row['roofline_tok_s']:>9.1f}"
            f" {row['decode_tok_s']:>9.1f} {row['share']:>6.1%}   {at}   {row['note']}"
        )

    if "agent" not in args.skip:
        agent_turns(
            args, path, threads, measured.get("engine int4"), bandwidth, best.best_gb_s, report
        )

    if "batched" not in args.skip:
        config = read_config(path)
        weights = args.weights.split(",")[0]
        step_s = run(batched_child, path, weights, threads, args.batch, args.batch_prompt, 16)
        gemm = gemm_flops(config, args.batch, threads)
        flops = step_flops(config, args.batch, args.batch_prompt + 8)
        report["batched"] = {"rows": args.batch, "weights": weights, "flops": flops, **gemm}
        print(
            f"\none step of {args.batch} decode rows ({args.batch_prompt}-token prompts):"
            f" {flops / 1e9:.2f} GFLOP; float32 GEMM at these shapes would take"
            f" {gemm['step_matmul_s'] * 1e3:.1f} ms ("
            + ", ".join(
                f"{k.removesuffix('_gflop_s')} {v:.0f}"
                for k, v in gemm.items()
                if k.endswith("gflop_s")
            )
            + " GFLOP/s)"
        )
        if step_s is not None:
            achieved = flops / step_s["step_s"] / 1e9
            peak = flops / gemm["step_matmul_s"] / 1e9
            report["batched"] |= step_s | {"gflop_s": achieved, "peak_gflop_s": peak}
            print(
                f"engine {weights}: {step_s['step_s'] * 1e3:.1f} ms per step (median),"
                f" {achieved:.0f} GFLOP/s, {achieved / peak:.1%} of float32 GEMM's {peak:.0f}"
            )
    report["load_end"] = os.getloadavg()
    print(f"load average at the end {report['load_end']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


def agent_turns(
    args: argparse.Namespace,
    path: Path,
    threads: int,
    int4: tuple[StepBytes, float, str] | None,
    bandwidth: float,
    gb_s: float,
    report: dict[str, Any],
) -> None:
    """Effective decode tokens/s on real agent turns, with and without drafts, against the
    plain-decode roofline at the turns' own mean context (default int4 weights)."""
    turns = run(agent_turns_child, threads, args.agent_tasks, args.speculate, 128)
    step = int4[0] if int4 is not None else None
    if step is None:
        found = run(bytes_child, path, "int4", threads)
        step = found[0] if found is not None else None
    if turns is None or step is None:
        print("agent turns: the child process failed")
        return
    roofline = bandwidth / step.at(round(turns["mean_context"]))
    report["agent_turns"] = turns | {"roofline_tok_s": roofline}
    print(
        f"\nagent turns ({turns['calls']} calls of the first {args.agent_tasks} tasks of"
        f" evals/basic.yaml, {turns['tokens']} output tokens, mean context"
        f" {turns['mean_context']:.0f}): roofline {roofline:.1f} tok/s at {gb_s:.1f} GB/s"
    )
    print(f"  {'engine int4':<20} {'whole calls':>24} {'after the first token':>30}")
    for label, key in (("no drafts", "off"), (f"k={turns['k']}", "on")):
        whole, decode = turns[f"{key}_tok_s"], turns[f"{key}_decode_tok_s"]
        print(
            f"  {label:<20} {whole:9.1f} tok/s {whole / roofline:5.2f}x"
            f" {decode:15.1f} tok/s {decode / roofline:5.2f}x the roofline"
        )
    print(f"  greedy output identical with and without drafts: {turns['greedy_identical']}")


def _row(step: StepBytes, tok_s: float, bandwidth: float, context: float, note: str) -> dict:
    step_bytes = step.weights + step.kv_per_token * context
    roofline = bandwidth / step_bytes
    return {
        "weights_bytes": step.weights,
        "kv_bytes": step.kv_per_token * context,
        "step_bytes": step_bytes,
        "parts": asdict(step),
        "roofline_tok_s": roofline,
        "decode_tok_s": tok_s,
        "share": tok_s / roofline,
        "note": note,
    }


if __name__ == "__main__":
    main()
