"""Time to first token of a fresh process's first prompt, with the disk prefix cache and without.

Each ``agent run`` is a new process, so the in-memory prefix cache starts empty and the first
prompt (system prompt, tool schemas, the task: about 800 tokens for the small-model profile) is
prefilled from scratch. This starts three processes one after another on the same agent-like
prompt: one with the disk cache off, one with it on over an empty folder (it writes the prompt's
blocks), one with it on over what the second wrote. Each reports its time to first token, the
prompt tokens served from cache, and the model load time. Run by hand:

    PYTHONPATH=. python bench/disk_prefix_cache.py [--prompt-tokens 800] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SYSTEM = (
    "You are clawloop, an agent that works in the user's folder through tools. "
    "Call exactly one tool per turn; when you know the answer, call answer."
)


def agent_prompt(template: Any, tokenizer: Any, target: int) -> list[int]:
    """System prompt, tool schemas and a task through the model's chat template, ~``target``."""
    from agent.messages import FunctionSpec, SystemMessage, ToolSpec, UserMessage

    def tools(count: int) -> list[ToolSpec]:
        schema = {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "a file in the workspace"}},
            "required": ["path"],
        }
        return [
            ToolSpec(
                function=FunctionSpec(
                    name=f"tool_{i}",
                    description=f"Tool number {i}: inspects a file",
                    parameters=schema,
                )
            )
            for i in range(count)
        ]

    messages = [SystemMessage(content=SYSTEM), UserMessage(content="How many lines in README.md?")]
    count, ids = 1, []
    while True:
        text = template.render(messages, tools=tools(count), add_generation_prompt=True)
        ids = tokenizer.encode(text)
        if len(ids) >= target:
            return ids
        count += 1


def child(mode: str, target: int) -> dict[str, Any]:
    """One fresh process's figures for ``mode``: off, or on (the folder is XDG_CACHE_HOME's)."""
    start = time.perf_counter()
    from backends.engine.backend import load_engine
    from backends.engine.core.params import SamplingParams

    loaded = load_engine(disk_cache=mode != "off", kv_cache_bytes=256 << 20)
    load_s = time.perf_counter() - start
    prompt = agent_prompt(loaded.template, loaded.tokenizer, target)
    begin = time.perf_counter()
    [result] = loaded.engine.generate([prompt], SamplingParams(temperature=0.0, max_tokens=1))
    ttft = time.perf_counter() - begin
    disk = loaded.engine.core.disk_cache
    flush_s = 0.0
    if disk is not None:
        begin = time.perf_counter()
        disk.flush(60)
        flush_s = time.perf_counter() - begin
    return {
        "mode": mode,
        "prompt": len(prompt),
        "cached": result.cached_tokens,
        "ttft_s": ttft,
        "load_s": load_s,
        "flush_s": flush_s,
        "written": disk.stats.written if disk is not None else 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt-tokens", type=int, default=800)
    parser.add_argument("--threads", type=int, default=0, help="CLAWLOOP_ENGINE_THREADS (0: unset)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.prompt_tokens)))
        return

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[1]), *sys.path])
    if args.threads:
        env["CLAWLOOP_ENGINE_THREADS"] = str(args.threads)
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        env["XDG_CACHE_HOME"] = cache
        for mode, label in (("off", "disk cache off"), ("on", "on, empty"), ("on", "on, warm")):
            command = [sys.executable, __file__, "--child", mode]
            command += ["--prompt-tokens", str(args.prompt_tokens)]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            rows.append((label, json.loads(done.stdout.strip().splitlines()[-1])))

    from rich.console import Console
    from rich.table import Table

    table = Table(title="A fresh process's first prompt, bundled model, CPU")
    for column in ("run", "prompt", "cached", "first token (s)", "load (s)", "flush (s)"):
        table.add_column(column, justify="right")
    for label, row in rows:
        table.add_row(
            label,
            str(row["prompt"]),
            str(row["cached"]),
            f"{row['ttft_s']:.2f}",
            f"{row['load_s']:.1f}",
            f"{row['flush_s']:.2f}",
        )
    Console().print(table)
    off, warm = rows[0][1], rows[2][1]
    print(
        f"time to first token: {off['ttft_s']:.2f} s cold, {warm['ttft_s']:.2f} s from disk "
        f"({off['ttft_s'] / warm['ttft_s']:.1f}x)"
    )


if __name__ == "__main__":
    main()
