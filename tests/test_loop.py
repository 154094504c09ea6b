"""The agent loop driven by the scripted fake backend: dispatch, recovery, limits, persistence."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from agent.backend import Backend, BackendEvent, Completion, TextDelta
from agent.errors import BackendError, ToolError
from agent.events import (
    ErrorEvent,
    Event,
    FinalEvent,
    TokenEvent,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
)
from agent.loop import AgentLoop, Decoding, LoopLimits
from agent.messages import AssistantMessage, ChatRequest, ToolCall, ToolMessage
from agent.session import Session
from agent.tools import Toolbox, function_tool
from backends.fake import FakeBackend

REPO = Path(__file__).resolve().parents[1]


def add(a: int, b: int) -> str:
    """Add two whole numbers."""
    return str(a + b)


def call(name: str, arguments: dict[str, Any] | str, text: str | None = None) -> AssistantMessage:
    return AssistantMessage(content=text, tool_calls=[ToolCall.make(name, arguments)])


def answer(text: str) -> AssistantMessage:
    return AssistantMessage(content=text)


def run(
    turns: list[Any],
    tools: list[Any] | None = None,
    limits: LoopLimits | None = None,
    session: Session | None = None,
    **loop_args: Any,
) -> tuple[list[Event], FakeBackend, Session]:
    backend = FakeBackend(turns)
    loop = AgentLoop(
        backend, Toolbox(tools if tools is not None else [function_tool(add)]),
        limits=limits or LoopLimits(), **loop_args,
    )  # fmt: skip
    session = session or Session()
    return list(loop.run(session, "task")), backend, session


def of_type(events: list[Event], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def observations(events: list[Event]) -> list[str]:
    return [e.content for e in of_type(events, ToolResultEvent)]


def test_final_answer_streams_tokens_and_reports_usage():
    events, backend, session = run([answer("All done here.")], system_prompt="Be brief.")
    assert "".join(e.text for e in of_type(events, TokenEvent)) == "All done here."
    assert of_type(events, FinalEvent) == [FinalEvent("All done here.")]
    [usage] = of_type(events, UsageEvent)
    assert isinstance(events[-1], UsageEvent) and usage.steps == 1 and usage.completion_tokens == 3
    assert [m.role for m in session.messages] == ["system", "user", "assistant"]
    assert backend.requests[0].tools and backend.requests[0].tools[0].function.name == "add"


def test_tool_call_is_dispatched_and_its_result_sent_back():
    events, backend, session = run([call("add", {"a": 2, "b": 3}), answer("5")])
    [result] = of_type(events, ToolResultEvent)
    assert result.ok and result.content == "5" and result.name == "add"
    [tool_message] = [m for m in backend.requests[1].messages if isinstance(m, ToolMessage)]
    [sent] = of_type(events, ToolCallEvent)
    assert tool_message.tool_call_id == sent.call.id == result.call_id
    assert tool_message.content == "5"
    assert of_type(events, FinalEvent) == [FinalEvent("5")]
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "assistant"]


def test_parallel_calls_run_in_order():
    turn = AssistantMessage(
        tool_calls=[ToolCall.make("add", {"a": 1, "b": 1}), ToolCall.make("add", {"a": 2, "b": 2})]
    )
    events, _, session = run([turn, answer("2 and 4")])
    assert observations(events) == ["2", "4"]
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "tool", "assistant"]


def test_model_mistakes_become_observations_and_the_model_recovers():
    mistakes = [
        (call("sum", {"a": 1, "b": 2}), "there is no tool named 'sum'. Available tools: add"),
        (call("add", '{"a": 1, "b": '), "arguments for add are not valid JSON"),
        (call("add", "[1, 2]"), "arguments for add must be a JSON object"),
        (call("add", {"a": "one", "b": 2}), "invalid arguments for add: a:"),
        (call("add", {"a": 1}), "'b' is a required property"),
    ]
    for wrong, expected in mistakes:
        events, backend, _ = run([wrong, call("add", {"a": 1, "b": 2}), answer("3")])
        first, second = of_type(events, ToolResultEvent)
        assert not first.ok and expected in first.content, first.content
        assert second.ok and second.content == "3"
        assert of_type(events, FinalEvent) == [FinalEvent("3")]
        # The model saw the problem as a tool message answering its own call.
        sent = backend.requests[1].messages[-1]
        assert isinstance(sent, ToolMessage) and expected in sent.content


def test_failing_tools_become_observations():
    def fussy(mode: str) -> str:
        """Fail in different ways."""
        if mode == "tool-error":
            raise ToolError("the file is locked; try again later")
        raise ValueError("unexpected mode")

    turns = [call("fussy", {"mode": "tool-error"}), call("fussy", {"mode": "crash"}), answer("ok")]
    events, _, _ = run(turns, tools=[function_tool(fussy)])
    assert observations(events) == [
        "error: the file is locked; try again later",
        "error: fussy failed: ValueError: unexpected mode",
    ]
    assert [e.ok for e in of_type(events, ToolResultEvent)] == [False, False]
    assert of_type(events, FinalEvent) == [FinalEvent("ok")]


def test_a_slow_tool_times_out():
    release = threading.Event()

    def slow() -> str:
        """Wait for a long time."""
        release.wait(5)
        return "finally"

    limits = LoopLimits(tool_timeout_s=0.2)
    began = time.monotonic()
    events, _, _ = run([call("slow", {}), answer("gave up")], [function_tool(slow)], limits)
    release.set()
    assert time.monotonic() - began < 3
    [result] = of_type(events, ToolResultEvent)
    assert (
        not result.ok
        and result.content == "error: slow did not finish within 0.2 s and was abandoned"
    )
    assert of_type(events, FinalEvent) == [FinalEvent("gave up")]


def test_long_observations_are_cut_in_the_middle():
    def big() -> str:
        """A big result."""
        return "A" * 500 + "B" * 500

    events, _, _ = run([call("big", {}), answer("ok")], [function_tool(big)],
                       LoopLimits(max_observation_chars=100))  # fmt: skip
    [text] = observations(events)
    assert text.startswith("A" * 50) and text.endswith("B" * 50)
    assert "[... 900 characters cut ...]" in text


def test_step_limit_stops_with_an_error_event():
    turns = [call("add", {"a": i, "b": 1}) for i in range(10)]
    events, backend, _ = run(turns, limits=LoopLimits(max_steps=3))
    [error] = of_type(events, ErrorEvent)
    assert error.reason == "max_steps" and "3 steps" in error.message
    assert len(backend.requests) == 3 and not of_type(events, FinalEvent)
    assert of_type(events, UsageEvent)[0].steps == 3


def test_time_budget_stops_with_an_error_event():
    def nap() -> str:
        """Sleep a little."""
        time.sleep(0.15)
        return "rested"

    turns = [call("nap", {}) for _ in range(20)]
    events, backend, _ = run(turns, [function_tool(nap)], LoopLimits(time_budget_s=0.4))
    [error] = of_type(events, ErrorEvent)
    assert error.reason == "time_budget" and "0.4 s" in error.message
    assert 2 <= len(backend.requests) <= 5


def test_backend_failure_is_an_error_event():
    class Down:
        name = "down"

        def generate(self, request: ChatRequest) -> Iterator[BackendEvent]:
            raise BackendError("cannot reach http://127.0.0.1:1/v1: is the server running?")
            yield  # a generator, like every backend

    backend: Backend = Down()
    events = list(AgentLoop(backend, Toolbox()).run(Session(), "task"))
    [error] = of_type(events, ErrorEvent)
    assert error.reason == "backend" and "is the server running" in error.message


def test_cancel_stops_between_tokens():
    loop_box: list[AgentLoop] = []

    class Chatty:
        name = "chatty"

        def generate(self, request: ChatRequest) -> Iterator[BackendEvent]:
            for i in range(1000):
                if i == 3:
                    loop_box[0].cancel.set()
                yield TextDelta(f"w{i} ")
            yield Completion(AssistantMessage(content="never"))

    loop = AgentLoop(Chatty(), Toolbox())
    loop_box.append(loop)
    events = list(loop.run(Session(), "task"))
    assert len(of_type(events, TokenEvent)) == 4
    assert of_type(events, ErrorEvent)[0].reason == "aborted"


def test_session_is_written_message_by_message(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    seen: list[int] = []

    def count_lines_on_disk(request: ChatRequest) -> AssistantMessage:
        seen.append(len(path.read_text().splitlines()))
        return call("add", {"a": 1, "b": 1}) if len(seen) == 1 else answer("two")

    turns: list[Callable[[ChatRequest], AssistantMessage]] = [count_lines_on_disk] * 2
    events, _, session = run(turns, session=Session(path), system_prompt="sys")
    # Before each model call, everything said so far is already on disk.
    assert seen == [2, 4]
    reloaded = Session.open(path)
    assert [m.to_wire() for m in reloaded.messages] == [m.to_wire() for m in session.messages]
    assert [json.loads(line)["role"] for line in path.read_text().splitlines()] == [
        "system", "user", "assistant", "tool", "assistant",
    ]  # fmt: skip
    # Continuing the session sends the whole history again.
    events, backend, _ = run([answer("again")], session=Session.open(path))
    assert len(backend.requests[0].messages) == 6 and of_type(events, FinalEvent)


CHILD = """
import sys, time
from pathlib import Path
from agent.loop import AgentLoop
from agent.messages import AssistantMessage, ToolCall
from agent.session import Session
from agent.tools import Toolbox, function_tool
from backends.fake import FakeBackend

def slow_build(target: str) -> str:
    \"\"\"Build something slowly.\"\"\"
    Path(sys.argv[2]).write_text("started")
    time.sleep(60)
    return "built"

turns = [AssistantMessage(content="Building.",
                          tool_calls=[ToolCall.make("slow_build", {"target": "all"}, "call_1")])]
loop = AgentLoop(FakeBackend(turns), Toolbox([function_tool(slow_build)]), system_prompt="sys")
for _ in loop.run(Session(Path(sys.argv[1])), "build everything"):
    pass
"""


def test_a_kill_mid_turn_loses_nothing_already_said(tmp_path: Path):
    path, started = tmp_path / "s.jsonl", tmp_path / "started"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CHILD), str(path), str(started)], env=env
    )
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert child.poll() is None, "the child process ended early"
            assert time.monotonic() < deadline, "the tool never started"
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL
    session = Session.open(path)
    assert session.skipped_lines == 0
    assert [m.role for m in session.messages] == ["system", "user", "assistant"]
    assistant = session.messages[2]
    assert isinstance(assistant, AssistantMessage) and assistant.content == "Building."
    assert assistant.tool_calls and assistant.tool_calls[0].id == "call_1"
    # The conversation goes on from where it was cut: the lost tool result is simply absent.
    events, backend, _ = run([answer("Resumed.")], session=session)
    assert len(backend.requests[0].messages) == 4 and of_type(events, FinalEvent)


def test_decoding_settings_reach_the_backend():
    _, backend, _ = run([answer("x")], decoding=Decoding(temperature=0.0, max_tokens=9, seed=3),
                        model="tiny")  # fmt: skip
    request = backend.requests[0]
    assert (request.temperature, request.max_tokens, request.seed, request.model) == (
        0.0, 9, 3, "tiny",
    )  # fmt: skip
