"""Rejection sampling: tries are graded by the task's check, the first passing run is kept, and
only its useful steps become examples.

The model is a scripted backend here (the test is about what is kept, not about what a model
says); every run goes through the real loop, skills, sandbox and checks.
"""

from __future__ import annotations

from pathlib import Path

from agent.messages import AssistantMessage, ToolCall
from backends.fake import FakeBackend
from cli.config import load_settings
from cli.evals.generators.curriculum import generate
from cli.evals.generators.selfplay import sample
from skills.simple import ANSWER_TOOL


def _turn(name: str, **arguments: object) -> AssistantMessage:
    return AssistantMessage(content=None, tool_calls=[ToolCall.make(name, dict(arguments))])


def test_the_first_passing_try_is_kept_without_its_failed_call(tmp_path: Path) -> None:
    curriculum = generate(1, seed=5, families=["count"])
    [(task, gold)] = curriculum.items
    [good] = gold.calls
    script = [
        _turn(ANSWER_TOOL, text="It has 9999 of them."),  # try 1: a wrong answer, no call
        _turn(good.name, path="no-such-file.txt"),  # try 2: a call that fails,
        _turn(good.name, **good.arguments),  # then the right call,
        _turn(ANSWER_TOOL, text=gold.answer),  # then the right answer
    ]
    backend = FakeBackend(script)
    settings = load_settings({"data_dir": str(tmp_path)})
    [outcome] = sample(curriculum, settings, backend, tries=3)
    assert [t.passed for t in outcome.tries] == [False, True]  # no third try after a pass
    assert outcome.task == task.id and outcome.family == "count"
    said = [e["messages"][-1]["tool_calls"][0]["function"] for e in outcome.examples]
    assert [s["name"] for s in said] == [good.name, ANSWER_TOOL]
    assert "no-such-file.txt" not in said[0]["arguments"]
    # The failed call stays in the history the model saw, untrained (weight 0).
    last = outcome.examples[-1]["messages"]
    shown = [m for m in last[:-1] if m["role"] == "assistant"]
    own = [m for m in shown if not m["tool_calls"][0]["id"].startswith("call_example")]
    assert len(own) == 2 and all(m["weight"] == 0 for m in shown)


def test_a_task_no_try_passes_yields_nothing(tmp_path: Path) -> None:
    curriculum = generate(2, seed=9, families=["count"])
    backend = FakeBackend([], when_done="I am not sure.")
    outcomes = sample(curriculum, load_settings({"data_dir": str(tmp_path)}), backend, tries=2)
    assert [len(o.tries) for o in outcomes] == [2, 2]
    assert not any(o.passed or o.examples for o in outcomes)
