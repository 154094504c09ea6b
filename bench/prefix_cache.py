"""Time to first token of an agent's 10th turn with the prefix cache on and off.

An agent resends the whole conversation every turn. This builds a 10-turn tool-using conversation
(about 2,000 tokens at the end) through the model's real chat template, sends each turn's prompt in
order, as an agent would, to an engine with prefix caching and to one without, and prints the time
to first token per turn and the share of prompt tokens served from the cache. Run by hand:

    PYTHONPATH=. python bench/prefix_cache.py
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path
from typing import Any

TURNS = 10


def conversation(turns: int, lines_per_result: int) -> list[Any]:
    """System, user, then ``turns`` rounds of an assistant tool call and its result."""
    from agent.messages import AssistantMessage, SystemMessage, ToolCall, ToolMessage, UserMessage

    messages: list[Any] = [
        SystemMessage(content="You are a coding agent. Use run_shell to inspect the repository."),
        UserMessage(content="Find where the retry logic lives and explain how it backs off."),
    ]
    for turn in range(turns):
        call = ToolCall.make("run_shell", {"command": f"ls -la src/part{turn}"}, f"call_{turn}")
        messages.append(AssistantMessage(content=f"Looking at part {turn}.", tool_calls=[call]))
        listing = "\n".join(
            f"-rw-r--r-- 1 dev {1000 + 37 * i + turn} Nov {1 + i % 28} src/part{turn}/mod_{i}.py"
            for i in range(lines_per_result)
        )
        messages.append(ToolMessage(tool_call_id=call.id, content=listing))
    return messages


def tools() -> list[Any]:
    from agent.messages import FunctionSpec, ToolSpec

    schema = {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    }
    return [
        ToolSpec(
            function=FunctionSpec(name="run_shell", description="Run a command", parameters=schema)
        )
    ]


def turn_prompts(template: Any, tokenizer: Any, target_tokens: int) -> list[list[int]]:
    """The token ids each turn sends, sized so the last one is about ``target_tokens`` long."""

    def prompts(lines: int) -> list[list[int]]:
        out = []
        for turn in range(1, TURNS + 1):
            messages = conversation(turn, lines)[: 2 + 2 * turn]
            text = template.render(messages, tools=tools(), add_generation_prompt=True)
            out.append(tokenizer.encode(text))
        return out

    lines = 1
    while len(prompts(lines + 1)[-1]) <= target_tokens:
        lines += 1
    below, above = prompts(lines), prompts(lines + 1)
    closer = abs(len(below[-1]) - target_tokens) <= abs(len(above[-1]) - target_tokens)
    return below if closer else above


def time_to_first_token(engine: Any, prompt: list[int], gen_tokens: int) -> tuple[float, int]:
    """Seconds until the first generated token, and the prompt tokens served from the cache."""
    from backends.engine.core.params import SamplingParams

    start = time.perf_counter()
    request = engine.add_request(prompt, SamplingParams(temperature=0.0, max_tokens=gen_tokens))
    first = None
    cached = 0
    while engine.has_unfinished():
        for out in engine.step():
            if out.request_id == request and out.delta.token_ids and first is None:
                first = time.perf_counter() - start
            if out.request_id == request and out.result is not None:
                cached = out.result.cached_tokens
    if first is None:
        raise SystemExit("the engine produced no token")
    return first, cached


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", help="a .gguf file or Hugging Face folder (default: the bundled model)"
    )
    parser.add_argument("--device", default=None)
    parser.add_argument("--target-tokens", type=int, default=2000)
    parser.add_argument("--gen-tokens", type=int, default=8, help="tokens generated per turn")
    parser.add_argument("--block-size", type=int, default=16)
    args = parser.parse_args()

    import torch
    from rich.console import Console
    from rich.table import Table

    from backends.engine.core.engine_config import EngineConfig
    from backends.engine.core.llm_engine import LLMEngine
    from backends.engine.model.model_runner import ModelRunner
    from backends.gguf.default_model import default_model_path
    from backends.local.chat_template import ChatTemplate

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    path = Path(args.model).expanduser() if args.model else default_model_path()
    runner = ModelRunner(EngineConfig(path, device=device, block_size=args.block_size))
    tok = runner.tokenizer
    template = ChatTemplate(
        source=tok.chat_template, bos_token=tok.bos_token, eos_token=tok.eos_token
    )
    prompts = turn_prompts(template, tok, args.target_tokens)
    for earlier, later in itertools.pairwise(prompts):
        if later[: len(earlier) - 8] != earlier[: len(earlier) - 8]:
            print("warning: a turn re-tokenizes earlier turns differently; cache hits will suffer")

    # The first forward passes of a process are slow (allocator, kernel setup): warm up on
    # unrelated prompts of turn-like lengths before timing anything.
    warmup = LLMEngine(runner, EngineConfig(enable_prefix_caching=False))
    for length in (512, 256, 2048, 192):
        time_to_first_token(warmup, [1000 + i % 5000 for i in range(length)], 2)
    results = {}
    # The engines share the runner in turn, each starting with an empty block table and cache.
    for caching in (False, True):
        engine = LLMEngine(runner, EngineConfig(enable_prefix_caching=caching))
        results[caching] = [time_to_first_token(engine, p, args.gen_tokens) for p in prompts]

    table = Table(title=f"Agent conversation, {path.name}, {device}: time to first token (ms)")
    for column in ("turn", "prompt tokens", "cached", "no cache", "prefix cache", "speed-up"):
        table.add_column(column, justify="right")
    for turn, prompt in enumerate(prompts):
        (cold, _), (warm, cached) = results[False][turn], results[True][turn]
        table.add_row(
            str(turn + 1),
            str(len(prompt)),
            str(cached),
            f"{cold * 1e3:.0f}",
            f"{warm * 1e3:.0f}",
            f"{cold / warm:.1f}x",
        )
    console = Console()
    console.print(table)
    last = len(prompts[-1])
    (cold, _), (warm, cached) = results[False][-1], results[True][-1]
    total_cached = sum(c for _, c in results[True])
    total = sum(len(p) for p in prompts)
    console.print(
        f"last turn ({last} tokens): {cold * 1e3:.0f} ms without the cache,"
        f" {warm * 1e3:.0f} ms with it"
        f" ({cold / warm:.1f}x); {cached / last:.1%} of its prompt from cache;"
        f" {total_cached / total:.1%} of all turns' prompt tokens"
    )
    runner.close()


if __name__ == "__main__":
    main()
