"""Where one sequence's decode step goes: timers around the engine's parts, per step.

The workload is single_stream.py's (a 1,000-token prompt, 256 new tokens, greedy); the timers
wrap, on one runner, ``LLMEngine.step`` (all of it), ``ModelRunner._execute`` (on the compute
thread: the step less the scheduler's and the handoff's share), the fused call through every
layer, the attention plan, the embedding lookup, the final norm and LM head
(``CausalLM.logits``) and the sampler. What the parts leave of their parent is Python: the
scheduler and output handling outside ``_execute``, tensor set-up inside it. Inside the fused
call (one C call for all layers) timers cannot reach: run this under ``perf record`` for the
split between the projections and the attention. Run by hand:

    PYTHONPATH=. python bench/decode_profile.py --threads 2
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from single_stream import make_prompt


class Timers:
    """Seconds per named part, summed over the measured steps."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.on = False

    def wrap(self, name: str, fn: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if not self.on:
                return fn(*args, **kwargs)
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start

        return timed


class _TimedStep:
    """The bound fused step with its call timed; its attributes are the step's own."""

    def __init__(self, step: Any, timers: Timers) -> None:
        self._step = step
        self._call = timers.wrap("fused layers", step.__call__)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._step, name)

    def __call__(self, *args: Any) -> Any:
        return self._call(*args)


def profile(path: Path, weights: str | None, threads: int, prompt_len: int, new: int) -> None:
    import torch

    import backends.engine.model.model_runner as model_runner
    from backends.engine.core.engine_config import EngineConfig
    from backends.engine.core.llm_engine import LLMEngine
    from backends.engine.core.params import SamplingParams

    torch.set_num_threads(threads)
    runner = model_runner.ModelRunner(EngineConfig(path, kv_cache_bytes=256 << 20, weights=weights))
    timers = Timers()
    runner._execute = timers.wrap("runner._execute", runner._execute)  # type: ignore[method-assign]
    runner._sample = timers.wrap("sampler", runner._sample)
    runner.model.logits = timers.wrap("final norm + LM head", runner.model.logits)
    embed = runner.model.embed
    embed.forward = timers.wrap("embedding", embed.forward)  # type: ignore[method-assign]
    model_runner.plan_cpu_attention = timers.wrap("attention plan", model_runner.plan_cpu_attention)
    if runner._fused is not None:
        runner._fused = _TimedStep(runner._fused, timers)  # type: ignore[assignment]
    LLMEngine(runner).generate([make_prompt(200)], SamplingParams(temperature=0.0, max_tokens=4))
    engine = LLMEngine(runner)
    engine.add_request(
        make_prompt(prompt_len), SamplingParams(0.0, max_tokens=new, ignore_eos=True)
    )
    while not any(out.delta.token_ids for out in engine.step()):
        pass  # the prompt
    timers.on = True
    steps, start = 0, time.perf_counter()
    while engine.has_unfinished():
        step_start = time.perf_counter()
        engine.step()
        timers.seconds["engine.step"] += time.perf_counter() - step_start
        steps += 1
    wall = time.perf_counter() - start
    _print(timers.seconds, steps, wall, runner._fused is not None)


def _print(seconds: dict[str, float], steps: int, wall: float, fused: bool) -> None:
    print(f"{steps} decode steps, {steps / wall:.1f} tok/s, fused step {'on' if fused else 'off'}")
    per = {name: s / steps * 1e3 for name, s in seconds.items()}
    inner = ("fused layers", "attention plan", "embedding", "final norm + LM head", "sampler")
    parts = [(name, per.get(name, 0.0)) for name in inner]
    parts.append(
        ("runner Python (tensors, plan)", per["runner._execute"] - sum(p for _, p in parts))
    )
    parts.append(("engine Python + handoff", per["engine.step"] - per["runner._execute"]))
    total = per["engine.step"]
    for name, ms in parts:
        print(f"  {name:<32} {ms:7.3f} ms  {ms / total:6.1%}")
    print(f"  {'step':<32} {total:7.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a .gguf file (default: the bundled model)")
    parser.add_argument("--weights", default=None, help="engine choice (default: the engine's)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--prompt-tokens", type=int, default=1000)
    parser.add_argument("--new-tokens", type=int, default=256)
    args = parser.parse_args()
    from backends.gguf.default_model import default_model_path

    path = Path(args.model).expanduser() if args.model else default_model_path()
    print(f"load average {os.getloadavg()}")
    profile(path, args.weights, args.threads, args.prompt_tokens, args.new_tokens)
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
