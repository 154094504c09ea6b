"""Loop guards through the real loop and the scripted fake backend: each pattern stops the run
with its reason, a run that makes progress is not stopped, and the trace says why it ended."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.errors import ToolError
from agent.events import ErrorEvent, Event, FinalEvent, ToolResultEvent
from agent.loop import AgentLoop, LoopLimits
from agent.messages import AssistantMessage, ToolCall
from agent.progress import GuardLimits
from agent.session import Session
from agent.tools import Toolbox, function_tool
from agent.trace import TraceWriter, read_trace, traced
from backends.fake import FakeBackend


def call(name: str, arguments: dict[str, Any] | str) -> AssistantMessage:
    return AssistantMessage(content=None, tool_calls=[ToolCall.make(name, arguments)])


def scripted(turns: list[Any]) -> list[AssistantMessage]:
    return [AssistantMessage(content=t) if isinstance(t, str) else t for t in turns]


def tools(root: Path) -> list[Any]:
    def read_file(path: str) -> str:
        """Read a text file."""
        target = root / path.strip().strip("/").lower()
        if not target.is_file():
            raise ToolError("no such file")
        return target.read_text(encoding="utf-8")

    def write_file(path: str, text: str) -> str:
        """Write a text file."""
        (root / path.strip().lower()).write_text(text, encoding="utf-8")
        return "written"

    def list_files() -> str:
        """List the files."""
        return "\n".join(sorted(p.name for p in root.iterdir()))

    def add(a: int, b: int) -> str:
        """Add two whole numbers."""
        return str(a + b)

    return [function_tool(f) for f in (read_file, write_file, list_files, add)]


def run(
    root: Path, turns: list[Any], guards: GuardLimits | None = None, **loop_args: Any
) -> tuple[list[Event], FakeBackend, Session]:
    backend = FakeBackend(scripted(turns), when_done="done.")
    loop = AgentLoop(
        backend,
        Toolbox(tools(root)),
        guards=GuardLimits() if guards is None else guards,
        limits=LoopLimits(max_steps=12),
        **loop_args,
    )
    session = Session()
    return list(loop.run(session, "task")), backend, session


def results(events: list[Event]) -> list[str]:
    return [e.content for e in events if isinstance(e, ToolResultEvent)]


def error(events: list[Event]) -> ErrorEvent:
    [found] = [e for e in events if isinstance(e, ErrorEvent)]
    return found


def test_the_same_error_three_times_stops_whatever_the_call(tmp_path: Path) -> None:
    turns = [
        call("read_file", {"path": "notes.txt"}),
        call("read_file", {"path": "NOTES.TXT"}),
        call("read_file", {"path": "notes.txt"}),
        "never reached",
    ]
    events, backend, session = run(tmp_path, turns)
    stop = error(events)
    assert stop.reason == "repeated_error"
    assert stop.message == (
        "stopped: read_file on notes.txt kept failing with the same error (3 times): "
        "error: no such file"
    )
    assert len(backend.requests) == 3  # stopped before a fourth model call
    assert not any(isinstance(e, FinalEvent) for e in events)
    # The second failure told the model, once, that one more would stop the run.
    first, second, _ = results(events)
    assert "(Note:" not in first and "(Note:" in second and "will stop the run" in second
    # Every call has its result in the conversation, so the session can go on.
    assert [m.role for m in session.messages][-2:] == ["assistant", "tool"]


def test_the_same_error_from_different_calls_counts(tmp_path: Path) -> None:
    turns = [
        call("read_file", {"path": "a.txt"}),
        call("read_file", {"path": "b.txt"}),
        call("read_file", {"path": "c.txt"}),
    ]
    events, _, _ = run(tmp_path, turns)
    assert error(events).reason == "repeated_error"
    assert "read_file on c.txt" in error(events).message


def test_near_identical_arguments_with_the_same_result_stop(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("one\n", encoding="utf-8")
    turns = [
        call("read_file", {"path": "notes.txt"}),
        call("read_file", '{ "path" :  "Notes.txt/" }'),
        call("add", {"a": 10, "b": 2}),
        call("read_file", {"path": " notes.txt "}),
        "never reached",
    ]
    events, backend, _ = run(tmp_path, turns)
    stop = error(events)
    assert stop.reason == "repeated_call"
    assert stop.message == "stopped: read_file on notes.txt kept giving the same result (3 times)"
    assert len(backend.requests) == 4


def test_numbers_and_key_order_do_not_make_calls_different(tmp_path: Path) -> None:
    turns = [
        call("add", {"a": 10, "b": 2}),
        call("add", '{"b": 2.0, "a": 10.0}'),
        call("add", '{"a":10,"b":2}'),
    ]
    events, _, _ = run(tmp_path, turns)
    assert error(events).reason == "repeated_call"
    assert results(events)[0] == "12"


def test_alternating_between_two_calls_stops(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n", encoding="utf-8")
    a, b = call("read_file", {"path": "a.txt"}), call("list_files", {})
    events, backend, _ = run(tmp_path, [a, b, a, b, a, "never reached"])
    stop = error(events)
    assert stop.reason == "alternating_calls"
    assert stop.message == (
        "stopped: the run kept going back and forth between read_file on a.txt and "
        "list_files with the same results (5 calls)"
    )
    assert len(backend.requests) == 5
    assert "going back and forth" in results(events)[3]  # the warning, one call earlier


def test_progress_with_similar_calls_is_not_stopped(tmp_path: Path) -> None:
    for name in ("a.txt", "b.txt", "c.txt"):
        (tmp_path / name).write_text(f"{name} text\n", encoding="utf-8")
    turns = [
        call("read_file", {"path": "a.txt"}),
        call("read_file", {"path": "b.txt"}),
        call("read_file", {"path": "c.txt"}),
        call("write_file", {"path": "a.txt", "text": "first edit"}),
        call("read_file", {"path": "a.txt"}),  # the same call, a new result: progress
        call("write_file", {"path": "a.txt", "text": "second edit"}),
        call("read_file", {"path": "a.txt"}),
        call("read_file", {"path": "missing-1.txt"}),  # two failures are not yet a loop
        call("read_file", {"path": "missing-2.txt"}),
        "All three files read.",
    ]
    events, _, _ = run(tmp_path, turns)
    assert not [e for e in events if isinstance(e, ErrorEvent)]
    assert [e for e in events if isinstance(e, FinalEvent)] == [FinalEvent("All three files read.")]
    assert results(events)[4] == "first edit" and results(events)[6] == "second edit"


def test_without_guards_the_same_error_goes_on_to_the_step_limit(tmp_path: Path) -> None:
    turns = [call("read_file", {"path": "notes.txt"})] * 5
    backend = FakeBackend(turns)
    loop = AgentLoop(backend, Toolbox(tools(tmp_path)), limits=LoopLimits(max_steps=4))
    events = list(loop.run(Session(), "task"))
    assert error(events).reason == "max_steps"


def test_a_limit_of_zero_turns_a_pattern_off(tmp_path: Path) -> None:
    turns = [call("read_file", {"path": "notes.txt"})] * 4 + ["gave up."]
    events, _, _ = run(
        tmp_path, turns, GuardLimits(repeated_call=0, repeated_error=0, alternation=0)
    )
    assert [e for e in events if isinstance(e, FinalEvent)] == [FinalEvent("gave up.")]


def test_without_the_first_warning_no_note_is_added(tmp_path: Path) -> None:
    turns = [call("read_file", {"path": "notes.txt"})] * 3
    events, _, _ = run(tmp_path, turns, GuardLimits(warn_first=False))
    assert error(events).reason == "repeated_error"
    assert all("(Note:" not in text for text in results(events))


def test_calls_the_repeat_guard_answers_still_count(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("one\n", encoding="utf-8")
    turns = [call("read_file", {"path": "notes.txt"})] * 3
    events, _, _ = run(tmp_path, turns, repeat_guard=True)
    assert error(events).reason == "repeated_call"


@pytest.mark.parametrize(
    ("turns", "reason"),
    [
        ([call("read_file", {"path": "notes.txt"})] * 3, "repeated_error"),
        ([call("list_files", {})] * 3, "repeated_call"),
    ],
)
def test_the_trace_outcome_names_the_guard(tmp_path: Path, turns: list[Any], reason: str) -> None:
    loop = AgentLoop(FakeBackend(scripted(turns)), Toolbox(tools(tmp_path)), guards=GuardLimits())
    writer = TraceWriter(tmp_path / "traces", "abc123")
    events = list(traced(loop.run(Session(), "task"), writer))
    outcome = read_trace(writer.path).outcome
    assert outcome is not None
    assert outcome["outcome"] == "error" and outcome["reason"] == reason
    assert outcome["detail"] == f"{reason}: {error(events).message}"
