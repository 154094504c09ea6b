"""Compaction through `agent run -s` and `agent sessions show [--full]`, in real processes.

The fake backend stands in for the model (scripted answers); the config gives it a small
context, so a few runs of one session pass the budget.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_run import agent, script


def test_a_continued_session_is_compacted_and_shown_whole_with_full(
    tmp_path: Path, workspace: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[compaction]\ncontext_tokens = 512\nkeep_turns = 1\nsummary = "extractive"\n',
        encoding="utf-8",
    )
    env = {"CLAWLOOP_CONFIG": str(config)}
    turns = script(tmp_path, ["noted, that is all for this task"])
    tasks = [f"task {i}: remember that the code for door {i} is {4000 + i}" for i in range(6)]
    for task in tasks:
        out = agent("run", task, "--script", str(turns), "-s", "long", cwd=workspace, env_extra=env)
        assert out.returncode == 0, out.stderr
    path = Path(os.environ["CLAWLOOP_DATA_DIR"]) / "sessions" / "long.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    compactions = [r["compaction"] for r in records if "compaction" in r]
    assert compactions and compactions[-1]["method"] == "extractive"
    assert "door 0 is 4000" in compactions[-1]["summary"]  # the oldest fact is kept
    assert sum(r.get("role") == "user" for r in records) == 6  # and every message on disk
    shown = agent("sessions", "show", "long", cwd=workspace, env_extra=env).stdout
    assert "earlier messages compacted" in shown and "--full" in shown
    assert "user: task 0" not in shown and "user: task 5" in shown
    full = agent("sessions", "show", "long", "--full", cwd=workspace, env_extra=env).stdout
    assert all(f"user: task {i}" in full for i in range(6))
    assert "were compacted" in full


def test_a_file_larger_than_the_context_is_read_on_the_bundled_model(
    tmp_path: Path, workspace: Path
) -> None:
    # The real bundled model on a 2048-token context: the file's text alone is more than the
    # context, and compaction has nothing older to cover. The result is cut in the request
    # (agent/fit.py) and the run goes on to an answer instead of stopping at the backend's
    # "more than the model's context".
    pytest.importorskip("llama_cpp")
    config = tmp_path / "config.toml"
    config.write_text("[backends.llamacpp]\nn_ctx = 2048\nthreads = 1\n", encoding="utf-8")
    lines = "".join(f"{i}: sensor reading {i * 7 % 13} ok\n" for i in range(900))
    (workspace / "big.txt").write_text(lines, encoding="utf-8")
    out = agent(
        "run",
        "show me big.txt",
        "--json",
        cwd=workspace,
        env_extra={"CLAWLOOP_CONFIG": str(config)},
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert not [e for e in events if e.get("type") == "error"], events
    assert any(e.get("type") == "final" for e in events), events
