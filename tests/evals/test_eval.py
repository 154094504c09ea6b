"""`agent eval`: a 3-task suite through the real loop, skills and sandbox, with the fake backend
standing in for the model, so the expected rates per variant are known exactly."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.errors import UserError
from agent.messages import AssistantMessage, ChatRequest, ToolCall
from backends.fake import FakeBackend
from cli.config import load_settings
from cli.evals.checks import failures
from cli.evals.report import summarize
from cli.evals.runner import Variant, run_suite
from cli.evals.stats import wilson
from cli.evals.store import save_report
from cli.evals.suite import Check, load_suite

ROOT = Path(__file__).resolve().parents[2]

SUITE = """
name: tiny
tasks:
  - id: count
    prompt: How many lines are in notes.txt?
    files: {notes.txt: "a\\nb\\nc\\n"}
    check: {answer_regex: '\\b3\\b'}
  - id: create
    prompt: Create hello.txt containing hi
    files: {}
    check: {files: {hello.txt: 'hi\\n?'}, max_calls: 1}
  - id: greet
    prompt: hello!
    files: {}
    check: {answer_regex: '(?i)hello', max_calls: 0}
"""


def _suite(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(SUITE, encoding="utf-8")
    return path


def _shell(command: str) -> AssistantMessage:
    return AssistantMessage(content=None, tool_calls=[ToolCall.make("shell", {"command": command})])


def careful(request: ChatRequest) -> AssistantMessage:
    """Does each task right: looks before answering, writes what was asked."""
    task = next(m.content for m in request.messages if m.role == "user")
    seen = [m for m in request.messages if m.role == "tool"]
    if "lines" in str(task):
        return (
            _shell("wc -l < notes.txt") if not seen else AssistantMessage(content=seen[-1].content)
        )
    if "Create" in str(task):
        return _shell("echo hi > hello.txt") if not seen else AssistantMessage(content="done")
    return AssistantMessage(content="Hello! How can I help?")


def sloppy(request: ChatRequest) -> AssistantMessage:
    """Guesses the count, writes the wrong text, and runs a tool to say hello."""
    task = str(next(m.content for m in request.messages if m.role == "user"))
    seen = [m for m in request.messages if m.role == "tool"]
    if seen:
        return AssistantMessage(content="hello, done")
    if "lines" in task:
        return AssistantMessage(content="There are 4 lines.")
    if "Create" in task:
        return _shell("echo bye > hello.txt")
    return _shell("echo hello")


def _variant(name: str, fn: object) -> Variant:
    settings = load_settings({"backend": "fake", "profile": "standard", "skills": ["shell"]})
    return Variant(name, settings, FakeBackend([fn] * 50))  # type: ignore[list-item]


def test_rates_per_variant_and_checks_that_fail_when_they_should(tmp_path: Path) -> None:
    suite = load_suite(_suite(tmp_path))
    variants = [_variant("careful", careful), _variant("sloppy", sloppy)]
    run_suite(suite, variants, repeat=2, jobs=2)
    good, bad = (summarize(v) for v in variants)
    assert (good.passed, good.total) == (6, 6)
    assert (bad.passed, bad.total) == (0, 6)
    why = {r.task: r.failures for r in variants[1].results}
    assert "does not match" in why["count"][0]
    assert "hello.txt holds 'bye\\n'" in why["create"][0]
    assert why["greet"] == ["1 tool calls (at most 0 allowed)"]
    for result in variants[0].results:
        trace = load_settings().traces_dir / f"{result.run_id}.jsonl"
        assert '"grade": "good"' in trace.read_text()


def test_a_task_that_crashes_fails_alone_and_the_suite_goes_on(tmp_path: Path) -> None:
    def breaks_on_create(request: ChatRequest) -> AssistantMessage:
        if "Create" in str(next(m.content for m in request.messages if m.role == "user")):
            raise RuntimeError("the sandbox could not start")
        return careful(request)

    variant = _variant("breaks", breaks_on_create)
    run_suite(load_suite(_suite(tmp_path)), [variant])
    results = {r.task: r for r in variant.results}
    assert [results[t].passed for t in ("count", "create", "greet")] == [True, False, True]
    assert results["create"].failures == ["crashed: RuntimeError: the sandbox could not start"]


def test_checks_cover_absent_files_and_commands(tmp_path: Path) -> None:
    (tmp_path / "old.txt").write_text("x")
    check = Check(absent=["old.txt"], command="test -d build")
    assert failures(check, tmp_path, "ok", 0) == [
        "old.txt still exists",
        "check command failed (1): test -d build",
    ]
    (tmp_path / "old.txt").unlink()
    (tmp_path / "build").mkdir()
    assert failures(check, tmp_path, "ok", 0) == []
    assert failures(check, tmp_path, None, 0) == ["no final answer"]


def test_wilson_interval() -> None:
    low, high = wilson(23, 46)
    assert 0.36 < low < 0.37 and 0.63 < high < 0.64
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == pytest.approx(1.0)


def test_a_bad_suite_is_one_line_naming_the_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntasks:\n  - id: a\n    prompt: p\n    check: {answer_regx: x}\n")
    with pytest.raises(UserError, match=r"bad.yaml: tasks.0.check.answer_regx"):
        load_suite(bad)
    bad.write_text(
        "name: x\ntasks:\n  - id: a\n    prompt: p\n    files: {../out: x}\n    check: {}\n"
    )
    with pytest.raises(UserError, match="relative path inside the workspace"):
        load_suite(bad)


def test_agent_eval_command_prints_json_per_task(tmp_path: Path) -> None:
    turns = tmp_path / "turns.json"
    turns.write_text(json.dumps(["Hello there!"] * 10))
    config = tmp_path / "config.toml"
    config.write_text(f'[backends.fake]\nscript = "{turns}"\n')
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "CLAWLOOP_CONFIG": str(config),
        "CLAWLOOP_DATA_DIR": str(tmp_path / "data"),
    }
    out = subprocess.run(
        [sys.executable, "-m", "cli.main", "eval", str(_suite(tmp_path)), "-b", "fake", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    [variant] = data["variants"]
    assert {t["task"]: t["passed"] for t in variant["tasks"]} == {
        "count": False,
        "create": False,
        "greet": True,
    }
    assert variant["passed"] == 1 and variant["total"] == 3 and 0 < variant["low"] < 0.34
    assert variant["backend"] == "fake"
    # The run's report is kept in the data folder, the same object plus when it ran.
    [kept] = (tmp_path / "data" / "evals").glob("*-tiny.json")
    stored = json.loads(kept.read_text(encoding="utf-8"))
    assert stored.pop("time").startswith("20") and stored == data
    assert str(kept) in out.stderr


def test_reports_kept_in_the_same_second_are_both_kept(tmp_path: Path) -> None:
    now = dt.datetime(2026, 5, 1, 12, 0, 0, tzinfo=dt.UTC)
    first = save_report(tmp_path, {"suite": "a/../b c", "variants": []}, now)
    second = save_report(tmp_path, {"suite": "a/../b c", "variants": []}, now)
    assert first.name == "20260501-120000-a-..-b-c.json"
    assert second.name == "20260501-120000-a-..-b-c-2.json"
    assert json.loads(second.read_text())["time"] == "2026-05-01T12:00:00+00:00"


def test_a_task_never_sees_the_users_memory(tmp_path: Path) -> None:
    from skills.memory.store import MemoryStore
    from skills.memory.tools import memory_folder

    settings = load_settings({"backend": "fake", "profile": "standard", "skills": ["memory"]})
    MemoryStore(memory_folder(settings.data_dir)).add("the user's name is Zorblat", "profile")

    def recalls(request: ChatRequest) -> AssistantMessage:
        seen = [m for m in request.messages if m.role == "tool"]
        if seen:
            return AssistantMessage(content=f"recalled: {seen[-1].content}")
        return AssistantMessage(tool_calls=[ToolCall.make("recall", {"query": "name"})])

    suite_path = tmp_path / "memory.yaml"
    suite_path.write_text(
        "name: memory\ntasks:\n  - id: name\n    prompt: What is my name?\n"
        "    check: {answer_regex: 'recalled'}\n",
        encoding="utf-8",
    )
    variant = Variant("recalls", settings, FakeBackend([recalls] * 5))  # type: ignore[list-item]
    run_suite(load_suite(suite_path), [variant])
    [result] = variant.results
    assert result.answer is not None and result.answer.startswith("recalled:")
    assert "Zorblat" not in result.answer  # the tool ran over the task's own empty memory
    system = variant.backend.requests[0].messages[0].content  # type: ignore[attr-defined]
    assert "Zorblat" not in str(system)


def test_before_messages_and_memory_files_reach_the_prompt_only_through_memory(
    tmp_path: Path,
) -> None:
    settings = load_settings(  # as `agent eval` loads them: memory off unless a task has its own
        {"backend": "fake", "profile": "standard", "skills": ["memory"], "memory.enabled": False}
    )

    def remembers_then_recalls(request: ChatRequest) -> AssistantMessage:
        task = str(next(m.content for m in request.messages if m.role == "user"))
        seen = [m for m in request.messages if m.role == "tool"]
        if seen:
            return AssistantMessage(content=f"recalled: {seen[-1].content}")
        if task.startswith("Remember"):
            return AssistantMessage(tool_calls=[ToolCall.make("remember", {"text": task[14:]})])
        return AssistantMessage(tool_calls=[ToolCall.make("recall", {"query": "called"})])

    suite_path = tmp_path / "memory.yaml"
    suite_path.write_text(
        "name: memory\ntasks:\n"
        "  - id: told\n    before: ['Remember that my cat is called Pixel']\n"
        "    prompt: What is my cat called?\n    check: {answer_regex: 'Pixel'}\n"
        '  - id: kept\n    memory: {USER.md: "- 2026-11-20: my dog is called Biscuit\\n"}\n'
        "    prompt: What is my dog called?\n    check: {answer_regex: 'Biscuit'}\n"
        "  - id: forgets\n    prompt: What is my cat called?\n"
        "    check: {answer_regex: 'Pixel'}\n",
        encoding="utf-8",
    )
    answers = [remembers_then_recalls] * 20
    variant = Variant("rr", settings, FakeBackend(answers))  # type: ignore[arg-type]
    run_suite(load_suite(suite_path), [variant])
    results = {r.task: r for r in variant.results}
    assert results["told"].passed, results["told"].failures
    assert results["told"].steps == 2  # the prompt's run alone: recall, then the answer
    assert results["kept"].passed, results["kept"].failures
    # A task without memory of its own runs with memory off: nothing leaks from another task.
    assert not results["forgets"].passed
    # Each request of the second conversation saw only the user message it began with.
    prompts = [
        [m.content for m in r.messages if m.role == "user"]
        for r in variant.backend.requests  # type: ignore[attr-defined]
    ]
    assert ["What is my cat called?"] in prompts
    assert not any(len(p) > 1 for p in prompts)


def test_a_task_can_change_its_files_mode_as_their_owner_would(tmp_path: Path) -> None:
    """Run as root, the task's files are given to the sandbox uid, as a person's files are
    theirs: ``chmod`` needs the owner, and a command in a workspace of root's runs as another
    uid (so under root this task could never pass before)."""
    (tmp_path / "suite.yaml").write_text(
        "name: modes\ntasks:\n  - id: chmod\n    prompt: Make deploy.sh executable.\n"
        '    files: {deploy.sh: "echo hi\\n", sub/keep.txt: "k\\n"}\n'
        "    check: {command: 'test -x deploy.sh && test -f sub/keep.txt'}\n"
    )

    def chmods(request: ChatRequest) -> AssistantMessage:
        seen = [m for m in request.messages if m.role == "tool"]
        return _shell("chmod +x deploy.sh") if not seen else AssistantMessage(content="done")

    variant = _variant("chmod", chmods)
    run_suite(load_suite(tmp_path / "suite.yaml"), [variant])
    [result] = variant.results
    assert result.passed, result.failures
