"""Worked examples chosen per task (agent/shots.py): the similarity, the choice, the loop's use
of it, and the bundled library (no held-out family, no task of an eval suite, real tools)."""

from __future__ import annotations

import json
from pathlib import Path

from agent.loop import AgentLoop
from agent.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from agent.session import Session
from agent.shots import ShotPicker, features, load_library, parse_library
from agent.tools import Toolbox, function_tool
from backends.fake import FakeBackend
from cli.evals.generators.catalogue import held_out_families
from cli.evals.suite import load_suite

ROOT = Path(__file__).resolve().parents[1]


def _line(family: str, prompt: str, tool: str, args: dict[str, str], result: str) -> str:
    call = ToolCall.make(tool, args, call_id=f"call_{family}")
    answer = ToolCall.make("answer", {"text": result}, call_id=f"call_{family}_a")
    messages = [
        UserMessage(content=prompt),
        AssistantMessage(content=None, tool_calls=[call]),
        ToolMessage(tool_call_id=call.id, name=tool, content=result),
        AssistantMessage(content=None, tool_calls=[answer]),
    ]
    record = {"family": family, "prompt": prompt, "messages": [m.to_record() for m in messages]}
    return json.dumps(record)


LIBRARY = [
    _line("first-line", "What is the first line of notes.txt?", "run_command",
          {"command": "head -n 1 notes.txt"}, "Dear diary"),
    _line("first-line", "Show the top line of todo.md", "run_command",
          {"command": "head -n 1 todo.md"}, "buy milk"),
    _line("sum-column", "What is the total of the amount column in sales.csv?", "run_command",
          {"command": "awk -F, 'NR>1 {s+=$2} END {print s}' sales.csv"}, "42"),
    _line("count-lines", "How many lines are in a.txt?", "count_lines", {"path": "a.txt"},
          "a.txt has 3 lines."),
]  # fmt: skip


def test_features_reduce_names_and_numbers_to_their_kind() -> None:
    words = features("What is line 12 of report.csv and the total?")
    assert "<csv>" in words and "<n>" in words
    assert "report.csv" not in words and "the" not in words
    assert "what line" in words  # pairs of neighbours (after stop words)


def test_the_nearest_shot_is_of_the_same_kind_and_comes_last() -> None:
    library = parse_library(LIBRARY)
    chosen = library.nearest("What's the first line in server.log?", 2)
    assert [s.family for s in chosen][-1] == "first-line"
    # One per family: the second first-line shot is not chosen beside the first.
    assert len({s.family for s in chosen}) == len(chosen) == 2


def test_no_shot_uses_a_tool_the_model_is_not_offered() -> None:
    library = parse_library(LIBRARY)
    chosen = library.nearest("How many lines are in the file?", 3, ["count_lines", "answer"])
    assert [s.family for s in chosen] == ["count-lines"]
    picker = ShotPicker(library, 3, exclude=frozenset({"run_command"}))
    shown = picker([UserMessage(content="first line of x.txt?")], ["count_lines", "run_command"])
    assert all(
        c.function.name != "run_command"
        for m in shown
        if isinstance(m, AssistantMessage)
        for c in m.tool_calls or []
    )


def test_every_request_of_a_run_shows_the_examples_chosen_for_its_task() -> None:
    @function_tool
    def run_command(command: str) -> str:
        """Run a shell command line."""
        return "hello"

    @function_tool
    def answer(text: str) -> str:
        """Reply to the user."""
        return text

    backend = FakeBackend(
        [
            AssistantMessage(
                content=None,
                tool_calls=[ToolCall.make("run_command", {"command": "head -n 1 x.txt"})],
            ),
            AssistantMessage(content=None, tool_calls=[ToolCall.make("answer", {"text": "hi"})]),
        ]
    )
    loop = AgentLoop(
        backend=backend,
        toolbox=Toolbox([run_command, answer]),
        system_prompt="sys",
        answer_tool="answer",
        pick_examples=ShotPicker(parse_library(LIBRARY), 1),
    )
    list(loop.run(Session(), "What is the first line of x.txt?"))
    assert len(backend.requests) == 2
    for request in backend.requests:
        shown = [m.content for m in request.messages if isinstance(m, UserMessage)]
        assert shown[0] in {"What is the first line of notes.txt?", "Show the top line of todo.md"}
        assert shown[-1] == "What is the first line of x.txt?"
    first, second = (r.messages for r in backend.requests)
    assert second[: len(first)] == first  # the prefix (and so the model's cache) holds


def test_the_bundled_library_holds_no_held_out_family_and_no_eval_task() -> None:
    library = load_library()
    assert len(library.shots) >= 150
    held = held_out_families()
    assert not [s.family for s in library.shots if s.family in held]
    prompts = {
        t.prompt.strip().lower()
        for suite in ("basic", "paraphrase", "unseen", "injection")
        for t in load_suite(ROOT / "evals" / f"{suite}.yaml").tasks
    }
    assert not [s.prompt for s in library.shots if s.prompt.strip().lower() in prompts]
    # Every shot ends with the answer tool and calls only the small profile's tools.
    tools = {"answer", "run_command", "count_lines", "read_file", "find_text", "write_file"}
    for shot in library.shots:
        last = shot.messages[-1]
        assert isinstance(last, AssistantMessage) and last.tool_calls
        assert last.tool_calls[0].function.name == "answer"
        assert shot.tools & tools or shot.tools == {"answer"}


def test_a_left_out_family_is_never_shown() -> None:
    library = parse_library(LIBRARY)
    question = "What's the first line in server.log?"
    assert "first-line" in {s.family for s in library.nearest(question, 3)}
    chosen = library.nearest(question, 3, leave_out=["first-line"])
    assert chosen and "first-line" not in {s.family for s in chosen}
    both = "How many lines are in the first file, notes.txt?"
    assert {s.family for s in library.nearest(both, 3)} >= {"first-line", "count-lines"}
    picker = ShotPicker(library, 3, leave_out=frozenset({"first-line", "sum-column"}))
    shown = picker([UserMessage(content=both)], ["count_lines", "run_command", "answer"])
    assert [m.content for m in shown if isinstance(m, UserMessage)] == [
        "How many lines are in a.txt?"
    ]
