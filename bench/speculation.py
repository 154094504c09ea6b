"""Prompt-lookup speculative decoding on real agent turns: decode speed with drafts and without.

Capture: the first ``--tasks`` tasks of an eval suite run through the real loop (skills,
sandbox, tool-call grammar) on the bundled engine, greedy, and every model call is recorded (the
rendered prompt, the request, its tools). Replay: each recorded call is decoded again on its own
without drafts and with each ``--k`` (drafted tokens per step), back to back in a rotating order
so that drifting load falls on every setting alike, after a warm-up call that puts its prompt in
the prefix cache, so the runs time decoding. Then the same for a few prompts that ask for new
prose, where little of the output is in the prompt: drafts are few and often wrong.

    PYTHONPATH=. python bench/speculation.py [--suite evals/basic.yaml] [--tasks 10]
        [--k 2 3 5] [--max-tokens 128] [--concurrent 1 2 4 8]

Per set it prints output tokens per second per setting (total tokens over the total wall time
of the calls; then the same after each call's first token, which the prompt's step makes, so
decoding alone), the speed-up over no drafts, the acceptance rate (kept / drafted tokens), tokens
per verification step, and whether every greedy output was identical to the one without drafts.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

PROSE = [
    "Write a short poem about the sea at night.",
    "Describe a busy market in a small town in one paragraph.",
    "Tell a two-sentence story about a lost umbrella.",
]


@dataclass(slots=True)
class Turn:
    prompt: str
    request: Any  # agent.messages.ChatRequest
    stop: list[str]
    tools: Any


class Recorder:
    """Wraps the engine decoder: records each call, then decodes it as usual."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.turns: list[Turn] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def decode(self, prompt: str, request: Any, stop: list[str], tools: Any) -> Iterator[Any]:
        self.turns.append(Turn(prompt, request, list(stop), tools))
        yield from self.inner.decode(prompt, request, stop, tools)


class FirstToken:
    """Wraps the engine: when the current request's first token came (its prompt's step)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.at: float | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def submit(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        stream = self.inner.submit(*args, **kwargs)
        try:
            for item in stream:
                if self.at is None and getattr(item, "token_ids", None):
                    self.at = time.perf_counter()
                yield item
        finally:
            stream.close()


def capture(suite_path: Path, tasks: int) -> tuple[Any, list[Turn]]:
    """Run the suite's first ``tasks`` tasks; the engine decoder and the recorded turns."""
    from cli.config import load_settings
    from cli.evals.runner import Variant, run_suite
    from cli.evals.suite import load_suite
    from cli.wiring import build_backend

    suite = load_suite(suite_path)
    suite.tasks = suite.tasks[:tasks]
    settings = load_settings({"backend": "engine", "decoding.temperature": 0.0})
    backend: Any = build_backend(settings)
    recorder = Recorder(backend.decoder)
    backend.decoder = recorder
    variant = Variant("capture", settings, backend)
    run_suite(suite, [variant])
    passed = sum(r.passed for r in variant.results)
    print(
        f"captured {len(recorder.turns)} model calls from {tasks} tasks of {suite.name}"
        f" (passed {passed}/{len(variant.results)})",
        flush=True,
    )
    decoder = recorder.inner
    decoder.engine = FirstToken(decoder.engine)
    return decoder, recorder.turns


@dataclass(slots=True)
class Arm:
    """One setting's totals over the replayed calls."""

    k: int
    seconds: float = 0.0
    tokens: int = 0
    texts: list[str] = field(default_factory=list)
    # after each call's first token (which the prompt's step makes): decoding alone
    decode_seconds: float = 0.0
    decode_tokens: int = 0


@dataclass(slots=True)
class Call:
    """One decoded call: seconds in all and after the first token, tokens, text."""

    seconds: float = 0.0
    after_first_s: float = 0.0
    tokens: int = 0
    prompt_tokens: int = 0
    text: str = ""


def decode_once(decoder: Any, turn: Turn, k: int, max_tokens: int) -> Call:
    """Decode ``turn`` with ``k`` drafted tokens."""
    from backends.base import DecodeResult

    decoder.num_speculative_tokens = k
    limit = min(turn.request.max_tokens or max_tokens, max_tokens)
    request = turn.request.model_copy(update={"max_tokens": limit})
    call = Call()
    text = []
    decoder.engine.at = None
    began = time.perf_counter()
    for item in decoder.decode(turn.prompt, request, turn.stop, turn.tools):
        if isinstance(item, DecodeResult):
            call.tokens += item.usage.completion_tokens
            call.prompt_tokens += item.usage.prompt_tokens
        else:
            text.append(item)
    ended = time.perf_counter()
    call.seconds, call.text = ended - began, "".join(text)
    call.after_first_s = ended - (decoder.engine.at or began)
    return call


def warm(decoder: Any, turns: list[Turn]) -> None:
    """One-token calls that leave every prompt in the prefix cache."""
    for turn in turns:
        decode_once(decoder, turn, 0, 1)


@dataclass(slots=True)
class Replay:
    """One set of calls decoded once per setting: each setting's totals, and the drafting
    counters per ``k`` (drafted, kept, verification steps, tokens those steps emitted)."""

    arms: list[Arm]
    counts: dict[int, list[int]]
    mean_context: float  # tokens of context per decoded token, on average

    @property
    def off(self) -> Arm:
        return self.arms[0]


def measure(decoder: Any, turns: list[Turn], ks: list[int], max_tokens: int) -> Replay:
    """Every call is decoded once per setting, the settings back to back and in a rotating
    order, so a change in the machine's load falls on all of them alike."""
    warm(decoder, turns)
    arms = [Arm(0), *(Arm(k) for k in ks)]
    before = replace(decoder.engine.stats.speculation)
    per_k: dict[int, list[int]] = {k: [0, 0, 0, 0] for k in ks}
    context = 0.0
    for index, turn in enumerate(turns):
        shift = index % len(arms)
        for arm in arms[shift:] + arms[:shift]:
            call = decode_once(decoder, turn, arm.k, max_tokens)
            after = decoder.engine.stats.speculation
            if arm.k:
                counts = per_k[arm.k]
                counts[0] += after.num_draft_tokens - before.num_draft_tokens
                counts[1] += after.num_accepted_tokens - before.num_accepted_tokens
                counts[2] += after.num_drafts - before.num_drafts
                counts[3] += after.num_emitted_tokens - before.num_emitted_tokens
            else:  # each output token's step reads the prompt and half the output, on average
                context += call.tokens * (call.prompt_tokens + call.tokens / 2)
            before = replace(after)
            arm.seconds += call.seconds
            arm.tokens += call.tokens
            arm.decode_seconds += call.after_first_s
            arm.decode_tokens += max(call.tokens - 1, 0)
            arm.texts.append(call.text)
    return Replay(arms, per_k, context / max(arms[0].tokens, 1))


def compare(name: str, decoder: Any, turns: list[Turn], ks: list[int], max_tokens: int) -> None:
    """Measure ``turns`` with each setting and print the rates (see the module's docstring)."""
    replay = measure(decoder, turns, ks, max_tokens)
    off = replay.off
    print(f"{name}: {len(turns)} calls, {off.tokens} output tokens", flush=True)
    print(
        f"  off:        {off.tokens / off.seconds:6.1f} tok/s"
        f"   after the first token {off.decode_tokens / off.decode_seconds:6.1f}",
        flush=True,
    )
    for arm in replay.arms[1:]:
        drafted, kept, steps, emitted = replay.counts[arm.k]
        rate = arm.tokens / arm.seconds
        speed_up = rate / (off.tokens / off.seconds)
        print(
            f"  on (k={arm.k}):   {rate:6.1f} tok/s"
            f"   after the first token {arm.decode_tokens / arm.decode_seconds:6.1f}"
            f"   speed-up {speed_up:4.2f}x"
            f"   acceptance {kept}/{drafted} = {kept / max(drafted, 1):.2f}"
            f"   tokens per verification step {emitted / max(steps, 1):.2f} ({steps} steps)"
            f"   greedy identical: {arm.texts == off.texts}",
            flush=True,
        )


def concurrent(decoder: Any, turns: list[Turn], ks: list[int], callers: list[int]) -> None:
    """Every call twice, from ``B`` threads at once for each ``B`` in ``callers`` (as a gateway
    serving several chats runs agent turns side by side on one engine): total output tokens/s
    without drafts and with each ``k``, each setting twice, alternating. (Only the totals: the
    first-token times of calls running side by side are not kept apart.)"""
    from concurrent.futures import ThreadPoolExecutor

    warm(decoder, turns)
    for width in callers:
        rates: dict[int, list[float]] = {k: [] for k in [0, *ks]}
        for _ in range(2):
            for k in rates:
                began = time.perf_counter()
                with ThreadPoolExecutor(width) as pool:
                    once = partial(decode_once, decoder, k=k, max_tokens=128)
                    calls = list(pool.map(once, turns * 2))
                rates[k].append(sum(c.tokens for c in calls) / (time.perf_counter() - began))
        print(
            f"  {width:3d} at once: "
            + "   ".join(
                f"{'off' if k == 0 else f'k={k}'} " + ", ".join(f"{r:.1f}" for r in v)
                for k, v in rates.items()
            )
            + " tok/s",
            flush=True,
        )


def prose_turns(decoder: Any) -> list[Turn]:
    from agent.messages import ChatRequest, UserMessage
    from backends.engine.backend import load_engine

    template = load_engine().template
    turns = []
    for text in PROSE:
        request = ChatRequest(messages=[UserMessage(content=text)], temperature=0.0)
        prompt = template.render(request.messages)
        turns.append(Turn(prompt, request, template.stop_strings, None))
    return turns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", type=Path, default=Path("evals/basic.yaml"))
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--k", type=int, nargs="+", default=[2, 3, 5], help="drafts per step")
    parser.add_argument("--max-tokens", type=int, default=256, help="cap per replayed call")
    parser.add_argument(
        "--concurrent", type=int, nargs="*", default=[], help="also: this many callers at once"
    )
    args = parser.parse_args()
    os.environ.setdefault("CLAWLOOP_DATA_DIR", tempfile.mkdtemp(prefix="clawloop-bench-"))
    decoder, turns = capture(args.suite, args.tasks)
    compare("agent turns", decoder, turns, args.k, args.max_tokens)
    compare("new prose", decoder, prose_turns(decoder), args.k, args.max_tokens)
    if args.concurrent:
        print(f"agent turns from several callers at once ({2 * len(turns)} calls each time):")
        concurrent(decoder, turns, args.k, args.concurrent)


if __name__ == "__main__":
    main()
