"""The agent loop's own cost per step, with a scripted backend and a trivial tool.

Each step is one scripted tool call (request building, the fake backend's streaming, argument
validation against the tool's JSON schema, dispatch through the tool thread pool, the session
append) and so measures everything the loop adds around the model. The goal is under 2 ms.

    PYTHONPATH=. python bench/loop_overhead.py [--steps 1000] [--session]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
from pathlib import Path

from agent.events import ToolResultEvent
from agent.loop import AgentLoop, LoopLimits
from agent.messages import AssistantMessage, ToolCall
from agent.session import Session
from agent.tools import Toolbox, function_tool
from backends.fake import FakeBackend


def echo(text: str) -> str:
    """Return the text."""
    return text


def measure(steps: int, session_file: Path | None) -> list[float]:
    """Seconds between consecutive tool results, ``steps`` of them."""
    turns = [
        AssistantMessage(content="Echoing.", tool_calls=[ToolCall.make("echo", {"text": f"{i}"})])
        for i in range(steps)
    ]
    backend = FakeBackend(turns, when_done="done")
    loop = AgentLoop(
        backend, Toolbox([function_tool(echo)]), limits=LoopLimits(max_steps=steps + 1)
    )
    stamps = [time.perf_counter()]
    for event in loop.run(Session(session_file), "echo a lot"):
        if isinstance(event, ToolResultEvent):
            stamps.append(time.perf_counter())
    return [b - a for a, b in itertools.pairwise(stamps)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--session", action="store_true", help="also write a session file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.jsonl" if args.session else None
        measure(50, None)  # warm up imports, the thread pool and schema caches
        in_order = [s * 1000 for s in measure(args.steps, path)]
    ms = sorted(in_order)
    p50 = statistics.median(ms)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    where = "with a session file (fsync per message)" if args.session else "in-memory session"
    print(f"loop overhead per step over {len(ms)} steps, {where}:")
    print(f"  mean {statistics.fmean(ms):.3f} ms   p50 {p50:.3f} ms   p99 {p99:.3f} ms")
    # Each request carries the whole history, so later steps cost more than early ones.
    window = max(1, len(in_order) // 10)
    first, last = statistics.fmean(in_order[:window]), statistics.fmean(in_order[-window:])
    print(f"  mean of the first {window} steps {first:.3f} ms, of the last {window} {last:.3f} ms")


if __name__ == "__main__":
    main()
