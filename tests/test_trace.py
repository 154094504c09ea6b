"""Traces: every step and decision recorded, readable after a kill, exported as training data."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from agent.loop import AgentLoop
from agent.messages import AssistantMessage, ToolCall
from agent.run_context import RunContext
from agent.session import Session
from agent.tools import Toolbox, function_tool
from agent.trace import TraceWriter, grade_trace, read_trace, traced
from backends.fake import FakeBackend
from cli.trace_export import export

REPO = Path(__file__).resolve().parents[1]


def add(a: int, b: int) -> str:
    """Add two whole numbers."""
    return str(a + b)


def _run(tmp_path: Path, turns: list[AssistantMessage], task: str = "what is 2+3?") -> Path:
    loop = AgentLoop(
        FakeBackend(turns),
        Toolbox([function_tool(add)]),
        system_prompt="Be brief.",
        prompt_label="test@2",
    )
    session = Session()
    writer = TraceWriter(tmp_path, "a1b2c3d4", redact=lambda s: s.replace("hunter2", "[redacted]"))

    def start() -> None:
        writer.start(
            prompt=loop.prompt_label,
            backend="fake",
            model=None,
            messages=list(session.messages),
            tools=loop.toolbox.specs(),
            extra={"task": task},
        )

    list(traced(loop.run(session, task, RunContext(run_id="a1b2c3d4")), writer, start))
    return writer.path


def test_a_trace_has_every_step_and_decision(tmp_path: Path) -> None:
    path = _run(
        tmp_path,
        [
            AssistantMessage(content=None, tool_calls=[ToolCall.make("add", {"a": 2, "b": 3})]),
            AssistantMessage(content=None, tool_calls=[ToolCall.make("nope", {})]),
            AssistantMessage(content="It is 5. The password hunter2 stays secret."),
        ],
    )
    trace = read_trace(path)
    kinds = [r["type"] for r in trace.records]
    assert kinds == [
        "start",
        "step",
        "tool_call",
        "tool_result",
        "step",
        "tool_call",
        "tool_result",
        "step",
        "final",
        "usage",
        "outcome",
    ]
    start = trace.start
    assert start["prompt"] == "test@2" and start["run_id"] == "a1b2c3d4"
    assert [m["role"] for m in start["messages"]] == ["system", "user"]
    assert start["tools"][0]["function"]["name"] == "add"
    steps = trace.of_type("step")
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert steps[0]["finish_reason"] == "tool_calls" and steps[-1]["finish_reason"] == "stop"
    assert all(s["messages"] >= 2 and "prompt_tokens" in s and "cached_tokens" in s for s in steps)
    results = trace.of_type("tool_result")
    assert results[0]["ok"] and results[0]["content"] == "5"
    assert results[1]["decision"] == "invalid" and "no tool named 'nope'" in results[1]["content"]
    assert trace.outcome == {**trace.outcome, "outcome": "answered"}
    assert "hunter2" not in path.read_text() and "[redacted]" in path.read_text()
    assert all(r["time"].endswith("Z") for r in trace.records)


def test_a_killed_run_reads_back_up_to_the_kill(tmp_path: Path) -> None:
    """A real process is killed with SIGKILL while a tool runs; the trace so far reads back."""
    program = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(REPO)!r})
        from agent.loop import AgentLoop
        from agent.messages import AssistantMessage, ToolCall
        from agent.session import Session
        from agent.tools import Toolbox, function_tool
        from agent.trace import TraceWriter, traced
        from backends.fake import FakeBackend

        def wait(seconds: int) -> str:
            '''Wait.'''
            print("waiting", flush=True)
            time.sleep(seconds)
            return "done"

        call = ToolCall.make("wait", {{"seconds": 60}})
        turns = [AssistantMessage(content=None, tool_calls=[call])]
        loop = AgentLoop(FakeBackend(turns), Toolbox([function_tool(wait)]))
        writer = TraceWriter(__import__("pathlib").Path({str(tmp_path)!r}), "dead0001")
        session = Session()
        start = lambda: writer.start(prompt="p@1", backend="fake", model=None,
                                     messages=list(session.messages), tools=[])
        for _ in traced(loop.run(session, "wait a minute"), writer, start):
            pass
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "waiting"
    time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    trace = read_trace(tmp_path / "dead0001.jsonl")
    assert [r["type"] for r in trace.records] == ["start", "step", "tool_call"]
    assert trace.outcome is None
    assert trace.start["messages"][-1] == {"role": "user", "content": "wait a minute"}
    with (tmp_path / "dead0001.jsonl").open("a") as fh:
        fh.write('{"type": "tool_res')  # a line torn by the kill is skipped, not fatal
    assert len(read_trace(tmp_path / "dead0001.jsonl").records) == 3


def test_export_skips_ungraded_bad_and_unfinished_traces_and_writes_valid_lines(
    tmp_path: Path,
) -> None:
    call = AssistantMessage(content=None, tool_calls=[ToolCall.make("add", {"a": 2, "b": 3})])
    good = _run(tmp_path / "good", [call, AssistantMessage(content="5")])
    again = _run(tmp_path / "again", [call, AssistantMessage(content="5")])
    bad = _run(tmp_path / "bad", [AssistantMessage(content="6")])
    ungraded = _run(tmp_path / "ungraded", [AssistantMessage(content="7")])
    unfinished = _run(tmp_path / "unfinished", [call] * 20)  # hits the step limit
    grade_trace(good, "good")
    grade_trace(again, "good")
    grade_trace(bad, "bad")
    grade_trace(unfinished, "good")
    traces = [read_trace(p) for p in (good, again, bad, ungraded, unfinished)]
    lines, summary = export(traces, "good")
    assert summary.written == 1
    assert dict(summary.skipped) == {
        "duplicate": 1,
        "graded bad": 1,
        "ungraded": 1,
        "without a final answer": 1,
    }
    example = json.loads(lines[0])
    roles = [m["role"] for m in example["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert example["messages"][2]["tool_calls"][0]["function"]["name"] == "add"
    assert example["messages"][3]["tool_call_id"] == example["messages"][2]["tool_calls"][0]["id"]
    assert example["tools"][0]["function"]["name"] == "add"
    assert "wrote 1 conversations" in summary.describe()
