"""`agent run` end to end through the real CLI process, the real loop, skills and sandbox.

The fake backend stands in for the model here (scripted turns); tests about model behaviour
drive the real bundled model in tests/backends/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def agent(
    *args: str, cwd: Path, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120", **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def script(tmp_path: Path, turns: list[object]) -> Path:
    path = tmp_path / "turns.json"
    path.write_text(json.dumps(turns), encoding="utf-8")
    return path


COUNT_LINES = [
    {
        "content": "I will count them.",
        "tool_calls": [{"name": "shell", "arguments": {"command": "wc -l notes.txt"}}],
    },
    "notes.txt has 3 lines.",
]


def test_json_events_end_with_the_final_answer(tmp_path: Path, workspace: Path) -> None:
    out = agent(
        "run",
        "how many lines are in notes.txt?",
        "--script",
        str(script(tmp_path, COUNT_LINES)),
        "--json",
        cwd=workspace,
    )
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds == ["step", "tool_call", "tool_result", "step", "usage", "final"]
    by_type = {e["type"]: e for e in events}
    assert (
        by_type["tool_result"]["ok"] is True and "3 notes.txt" in by_type["tool_result"]["content"]
    )
    assert events[-1]["content"] == "notes.txt has 3 lines."
    assert by_type["usage"]["steps"] == 2
    assert len({e["run_id"] for e in events}) == 1 and events[0]["run_id"]


def test_terminal_output_shows_tool_panels_and_summary(tmp_path: Path, workspace: Path) -> None:
    out = agent("run", "count", "--script", str(script(tmp_path, COUNT_LINES)), cwd=workspace)
    assert out.returncode == 0, out.stderr
    assert "tool call: shell" in out.stdout
    assert "wc -l notes.txt" in out.stdout
    assert "notes.txt has 3 lines." in out.stdout
    assert "2 steps" in out.stdout


def test_session_is_kept_and_continued(tmp_path: Path, workspace: Path) -> None:
    turns = script(tmp_path, ["first answer"])
    assert (
        agent("run", "first task", "--script", str(turns), "-s", "demo", cwd=workspace).returncode
        == 0
    )
    assert (
        agent("run", "second task", "--script", str(turns), "-s", "demo", cwd=workspace).returncode
        == 0
    )
    listing = agent("sessions", "list", cwd=workspace)
    assert "demo" in listing.stdout
    shown = agent("sessions", "show", "demo", cwd=workspace).stdout
    assert shown.index("first task") < shown.index("second task")
    lines = (
        (Path(os.environ["CLAWLOOP_DATA_DIR"]) / "sessions" / "demo.jsonl").read_text().splitlines()
    )
    roles = [json.loads(line)["role"] for line in lines]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    assert agent("sessions", "rm", "demo", cwd=workspace).returncode == 0
    assert "demo" not in agent("sessions", "list", cwd=workspace).stdout


def test_step_limit_exits_non_zero(tmp_path: Path, workspace: Path) -> None:
    looping = [{"tool_calls": [{"name": "shell", "arguments": {"command": "true"}}]}] * 5
    out = agent(
        "run",
        "loop",
        "--script",
        str(script(tmp_path, looping)),
        "--max-steps",
        "2",
        "--json",
        cwd=workspace,
    )
    assert out.returncode == 1
    errors = [json.loads(line) for line in out.stdout.splitlines() if '"error"' in line]
    assert errors and errors[0]["reason"] == "max_steps"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--backend", "nope"], "unknown backend 'nope'"),
        (["--model", "/nonexistent/model.gguf"], "does not exist"),
        (["--script", "/nonexistent/turns.json"], "does not exist"),
    ],
)
def test_user_errors_are_one_line(args: list[str], message: str, workspace: Path) -> None:
    out = agent("run", "hello", *args, cwd=workspace)
    assert out.returncode == 2
    assert message in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "Traceback" not in out.stderr


def test_not_a_gguf_file(tmp_path: Path, workspace: Path) -> None:
    fake_model = tmp_path / "model.gguf"
    fake_model.write_bytes(b"not a model at all")
    out = agent("run", "hello", "--model", str(fake_model), cwd=workspace)
    assert out.returncode == 2
    assert "is not a GGUF model file" in out.stderr


def test_invalid_config_names_the_key(workspace: Path) -> None:
    Path(os.environ["CLAWLOOP_CONFIG"]).write_text('backend = "fake"\nmax_steps = -3\n')
    out = agent("run", "hello", cwd=workspace)
    assert out.returncode == 2
    assert "'max_steps'" in out.stderr and "line 2" in out.stderr


def test_debug_variable_shows_the_traceback(workspace: Path) -> None:
    out = agent(
        "run", "hello", "--backend", "nope", cwd=workspace, env_extra={"CLAWLOOP_DEBUG": "1"}
    )
    assert out.returncode != 0
    assert "Traceback" in out.stderr


def test_agent_help_lists_the_commands(workspace: Path) -> None:
    out = agent("--help", cwd=workspace)
    for command in ("run", "chat", "models", "sessions", "tools", "audit", "engine"):
        assert command in out.stdout
