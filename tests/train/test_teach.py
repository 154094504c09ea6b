"""Teaching the model a family: distillation from a teacher on an OpenAI-compatible server, and
training on graded-good traces (a failed eval run corrected with `agent traces fix`).

Everything runs through the real CLI, loop, `simple` skill, sandbox and checks, and trains the
tiny random GGUF model for a step or two.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("peft")

from agent.trace import read_traces
from bench.scripted_openai import completion, scripted_server

ROOT = Path(__file__).resolve().parents[2]


def _agent(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160", **env},
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
    )


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"call_{len(json.dumps(arguments))}_{name}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def teacher_reply(body: dict[str, Any]) -> dict[str, Any]:
    """A scripted teacher: reads the task, makes the counting call, answers from its result.

    It stands in for a stronger model on an OpenAI-compatible server; what is tested is that its
    passing runs are kept and trained on, not what a real model would say. It gives up on byte
    counts, so some tasks fail and must be left out.
    """
    messages = body["messages"]
    task = [m for m in messages if m["role"] == "user"][-1]["content"]
    unit = re.search(r"\b(lines|words|bytes)\b", task)
    name = re.search(r"([\w-]+\.\w+)", task)
    results = messages[messages.index([m for m in messages if m["role"] == "user"][-1]) + 1 :]
    seen = [m for m in results if m["role"] == "tool"]
    if unit is None or name is None or unit[1] == "bytes":
        call = _call("answer", {"text": "I cannot tell."})
    elif not seen:
        call = _call(f"count_{unit[1]}", {"path": name[1]})
    else:
        call = _call("answer", {"text": seen[-1]["content"]})
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return completion(message, "tool_calls")


@pytest.fixture
def teacher_server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The scripted teacher on 127.0.0.1: its base URL and every request body it was sent."""
    with scripted_server(teacher_reply) as served:
        yield served


def test_a_teachers_passing_runs_are_kept_and_trained_on(
    tiny_gguf: Path, tmp_path: Path, teacher_server: tuple[str, list[dict[str, Any]]]
) -> None:
    url, requests = teacher_server
    out = tmp_path / "taught"
    done = _agent(
        "train", "--teacher", "openai", "--base-url", url, "--teacher-tasks", "3",
        "--family", "count", "--model", str(tiny_gguf), "--epochs", "1", "--accumulate", "1",
        "--out", str(out),
        env={"CLAWLOOP_DATA_DIR": str(tmp_path / "data"), "CLAWLOOP_CONFIG": str(tmp_path / "c")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    runs = read_traces(out / "teacher" / "traces")
    assert len(runs) == 3
    passing = [r for r in runs if r.grade == "good"]
    assert {"bytes" in r.start["task"] for r in passing} == {False}
    assert len(passing) == sum("bytes" not in r.start["task"] for r in runs) > 0

    # The teacher was sent what the embedded model is sent: the small profile's narrow tools,
    # cut down by tool selection (the first step of a task may not answer yet: look first), and
    # the answer tool once a result is in. The configuration has no run_command (the default),
    # so neither has the teacher: examples show the tools the adapter will run with.
    offered = [[t["function"]["name"] for t in body["tools"]] for body in requests]
    narrow = [[n for n in names if n != "answer"] for names in offered]
    assert all(len(names) <= 3 and "write_file" not in names for names in narrow), offered
    assert all("run_command" not in names for names in offered), offered
    assert any("answer" in names for names in offered)
    assert all(body["messages"][0]["role"] == "system" for body in requests)

    kept = [json.loads(line) for line in (out / "teacher.jsonl").read_text().splitlines()]
    assert len(kept) == 2 * len(passing)  # one example per step: the call, then the answer
    assert all(e["messages"][-1]["tool_calls"] for e in kept)
    manifest = json.loads((out / "manifest.json").read_text())
    taught = manifest["data"]["teacher"]
    assert taught["base_url"] == url and taught["model"] == "scripted-teacher"
    assert taught["per_family"] == {"count": {"passed": len(passing), "tasks": 3}}
    assert manifest["data"]["examples"] == len(kept)
    assert "loss per epoch" in done.stdout


SUITE = """
name: teach
tasks:
  - id: count-notes
    prompt: How many lines are in notes.txt?
    family: count
    files: {notes.txt: "a\\nb\\nc\\n"}
    check: {answer_regex: '\\b3\\b'}
  - id: greet
    prompt: hello!
    family: chat
    check: {answer_regex: '\\w', max_calls: 0}
"""


def _turn(name: str, **arguments: object) -> dict[str, object]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def test_a_fixed_run_is_trained_on_from_the_traces_folder(tiny_gguf: Path, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps([_turn("answer", text="It has 4 lines.")] * 4))
    config = tmp_path / "config.toml"
    # Memory off: with it, the fixed run's trace lists the memory tools, and the example
    # passes the trainer's 2048 tokens (a known gap: docs/assistant.md, Memory).
    config.write_text(
        f'profile = "small"\n[memory]\nenabled = false\n[backends.fake]\nscript = "{wrong}"\n'
    )
    suite = tmp_path / "teach.yaml"
    suite.write_text(SUITE)
    env = {"CLAWLOOP_DATA_DIR": str(tmp_path / "data"), "CLAWLOOP_CONFIG": str(config)}
    evaluated = _agent("eval", str(suite), "-b", "fake", "--json", env=env)
    assert evaluated.returncode == 0, evaluated.stderr
    traces = read_traces(tmp_path / "data" / "traces")
    [failed] = [t for t in traces if t.start["family"] == "count"]
    assert failed.grade == "bad"

    nothing = _agent(
        "train", "--from-traces", "--family", "count", "--model", str(tiny_gguf),
        "--out", str(tmp_path / "none"), env=env,
    )  # fmt: skip
    assert nothing.returncode == 2 and "agent traces fix" in nothing.stderr

    right = tmp_path / "right.json"
    right.write_text(
        json.dumps([_turn("count_lines", path="notes.txt"), _turn("answer", text="3 lines.")])
    )
    fixed = _agent("traces", "fix", failed.run_id, "--script", str(right), env=env)
    assert fixed.returncode == 0, fixed.stderr

    out = tmp_path / "adapter"
    trained = _agent(
        "train", "--from-traces", "--family", "count", "--since", "1d", "--model", str(tiny_gguf),
        "--epochs", "1", "--out", str(out), env=env,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    [line] = (out / "traces.jsonl").read_text().splitlines()
    example = json.loads(line)
    assert example["messages"][-1]["tool_calls"][0]["function"]["name"] == "answer"
    assert "3 lines." in example["messages"][-1]["tool_calls"][0]["function"]["arguments"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["data"]["files"] == [str(out / "traces.jsonl")]
    assert manifest["data"]["traces"]["conversations"] == 1
    assert manifest["data"]["traces"]["families"] == ["count"]
    assert "start_from" not in manifest["data"]  # the tiny model has no adapter of its own


def test_from_traces_starts_from_the_adapter_the_model_runs_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from backends.gguf.default_model import SHIPPED_ADAPTER, default_model_path
    from cli.train_cmd import _current_adapter

    config = tmp_path / "config.toml"
    monkeypatch.setenv("CLAWLOOP_CONFIG", str(config))
    monkeypatch.delenv("CLAWLOOP_ADAPTER", raising=False)
    assert _current_adapter(default_model_path()) == SHIPPED_ADAPTER
    assert _current_adapter(tmp_path / "other.gguf") is None
    config.write_text('adapter = "none"\n')
    assert _current_adapter(default_model_path()) is None


def test_a_held_out_suite_is_refused_as_the_teachers(tmp_path: Path) -> None:
    from agent.errors import UserError
    from cli.train_sources import teacher_suite

    held = tmp_path / "held.yaml"
    held.write_text(SUITE)
    with pytest.raises(UserError, match="is held out"):
        teacher_suite(held, None, [held])
    copy = tmp_path / "copy.yaml"
    copy.write_text(SUITE.replace("name: teach", "name: copy"))
    with pytest.raises(UserError, match=r"2 tasks .* have a held-out suite's prompt"):
        teacher_suite(copy, None, [held])
    other = tmp_path / "other.yaml"
    other.write_text(SUITE.replace("How many lines", "Count the lines").replace("hello!", "hi"))
    assert [t.id for t in teacher_suite(other, ["count"], [held]).tasks] == ["count-notes"]
