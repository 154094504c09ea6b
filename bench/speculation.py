"""Prompt-lookup speculative decoding on real agent turns: decode speed with drafts and without.

Capture: the first ``--tasks`` tasks of an eval suite run through the real loop (skills,
sandbox, tool-call grammar) on the bundled engine, greedy, and every model call is recorded (the
rendered prompt, the request, its tools). Replay: each recorded turn is decoded again on its
own, first without drafts and then with ``--k`` drafted tokens per step, after a warm-up call
that puts its prompt in the prefix cache, so both runs time decoding alone. Then the same for a
few prompts that ask for new prose, where little of the output is in the prompt (the drafts
find few or no matches and are mostly wrong): the case where speculation can only cost.

    PYTHONPATH=. python bench/speculation.py [--suite evals/basic.yaml] [--tasks 4] [--k 5]

Per set it prints output tokens per second with drafts and without (total tokens over total
wall time of the replayed calls), the speed-up, the acceptance rate (accepted / drafted tokens),
tokens per verification step, and whether every greedy output was identical.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
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
    return recorder.inner, recorder.turns


def replay(decoder: Any, turns: list[Turn], k: int, max_tokens: int) -> tuple[float, int, str]:
    """Decode every turn with ``k`` drafted tokens; (seconds, output tokens, joined texts)."""
    from backends.base import DecodeResult

    decoder.num_speculative_tokens = k
    seconds, tokens, texts = 0.0, 0, []
    for turn in turns:
        request = turn.request.model_copy(
            update={"max_tokens": min(turn.request.max_tokens or max_tokens, max_tokens)}
        )
        began = time.perf_counter()
        text = []
        for item in decoder.decode(turn.prompt, request, turn.stop, turn.tools):
            if isinstance(item, DecodeResult):
                tokens += item.usage.completion_tokens
            else:
                text.append(item)
        seconds += time.perf_counter() - began
        texts.append("".join(text))
    return seconds, tokens, "\x00".join(texts)


def warm(decoder: Any, turns: list[Turn]) -> None:
    """One-token calls that leave every prompt in the prefix cache."""
    decoder.num_speculative_tokens = 0
    for turn in turns:
        request = turn.request.model_copy(update={"max_tokens": 1})
        for _ in decoder.decode(turn.prompt, request, turn.stop, turn.tools):
            pass


def compare(name: str, decoder: Any, turns: list[Turn], ks: list[int], max_tokens: int) -> None:
    """Off, then each k, then off again (the machine's load drifts: the two off runs bound it)."""
    warm(decoder, turns)
    off_s, off_n, off_text = replay(decoder, turns, 0, max_tokens)
    print(f"{name}: {len(turns)} calls, {off_n} tokens", flush=True)
    print(f"  off:       {off_n / off_s:6.1f} tok/s", flush=True)
    for k in ks:
        before = replace(decoder.engine.stats.speculation)
        on_s, on_n, on_text = replay(decoder, turns, k, max_tokens)
        after = decoder.engine.stats.speculation
        drafted = after.num_draft_tokens - before.num_draft_tokens
        accepted = after.num_accepted_tokens - before.num_accepted_tokens
        steps = after.num_drafts - before.num_drafts
        emitted = after.num_emitted_tokens - before.num_emitted_tokens
        speed_up = (on_n / on_s) / (off_n / off_s)
        print(
            f"  on (k={k}):  {on_n / on_s:6.1f} tok/s   speed-up {speed_up:4.2f}x"
            f"   acceptance {accepted}/{drafted} = {accepted / max(drafted, 1):.2f}"
            f"   tokens per verification step {emitted / max(steps, 1):.2f} ({steps} steps)"
            f"   identical: {on_text == off_text}",
            flush=True,
        )
    again_s, again_n, _ = replay(decoder, turns, 0, max_tokens)
    print(f"  off again: {again_n / again_s:6.1f} tok/s", flush=True)


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
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--k", type=int, nargs="+", default=[2, 3, 5], help="drafts per step")
    parser.add_argument("--max-tokens", type=int, default=256, help="cap per replayed call")
    args = parser.parse_args()
    os.environ.setdefault("CLAWLOOP_DATA_DIR", tempfile.mkdtemp(prefix="clawloop-bench-"))
    decoder, turns = capture(args.suite, args.tasks)
    compare("agent turns", decoder, turns, args.k, args.max_tokens)
    compare("new prose", decoder, prose_turns(decoder), args.k, args.max_tokens)


if __name__ == "__main__":
    main()
