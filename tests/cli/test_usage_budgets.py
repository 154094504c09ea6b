"""`agent usage`, token budgets and loop guards end to end: the real CLI process, the real loop,
skills and sandbox, the scripted fake backend, and the traces the runs leave."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import pytest

from agent.trace import read_trace
from tests.cli.test_run import agent, script

READ_NOTES = [
    {"tool_calls": [{"name": "shell", "arguments": {"command": "cat notes.txt"}}]},
    "notes.txt says one, two, three.",
]


def configure(text: str) -> None:
    Path(os.environ["CLAWLOOP_CONFIG"]).write_text(text, encoding="utf-8")


def run_json(tmp_path: Path, ws: Path, turns: list[Any], *args: str) -> tuple[int, list[dict]]:
    out = agent("run", "task", "--script", str(script(tmp_path, turns)), "--json", *args, cwd=ws)
    assert "Traceback" not in out.stderr, out.stderr
    return out.returncode, [json.loads(line) for line in out.stdout.splitlines()]


def usage_rows(ws: Path, *args: str) -> dict[str, dict]:
    out = agent("usage", "--json", *args, cwd=ws)
    assert out.returncode == 0, out.stderr
    return {row["key"]: row for row in map(json.loads, out.stdout.splitlines())}


def one(events: list[dict], kind: str) -> dict:
    [found] = [e for e in events if e["type"] == kind]
    return found


def trace_of(events: list[dict]) -> Any:
    run_id = events[0]["run_id"]
    return read_trace(Path(os.environ["CLAWLOOP_DATA_DIR"]) / "traces" / f"{run_id}.jsonl")


def test_usage_sums_every_run_by_session_and_day_with_its_cost(
    tmp_path: Path, workspace: Path
) -> None:
    configure("[usage]\nprice_prompt_per_mtok = 2.0\nprice_completion_per_mtok = 10.0\n")
    spent = []
    for session in ("alpha", "alpha", "beta"):
        code, events = run_json(tmp_path, workspace, READ_NOTES, "-s", session)
        assert code == 0
        spent.append(one(events, "usage"))
    rows = usage_rows(workspace, "--by", "session")
    assert set(rows) == {"alpha", "beta", "total"}
    assert rows["alpha"]["runs"] == 2 and rows["beta"]["runs"] == 1
    prompt = sum(u["prompt_tokens"] for u in spent)
    completion = sum(u["completion_tokens"] for u in spent)
    assert prompt > 0 and completion > 0
    total = rows["total"]
    assert (total["prompt_tokens"], total["completion_tokens"], total["steps"]) == (
        prompt,
        completion,
        6,
    )
    assert rows["alpha"]["prompt_tokens"] == spent[0]["prompt_tokens"] + spent[1]["prompt_tokens"]
    assert total["cost"] == pytest.approx((prompt * 2.0 + completion * 10.0) / 1e6)
    by_day = usage_rows(workspace, "--by", "day", "--since", "1d")
    assert [k for k in by_day if k != "total"] == [dt.datetime.now().strftime("%Y-%m-%d")]
    assert by_day["total"]["prompt_tokens"] == prompt
    # The table says the same for people.
    table = agent("usage", "--by", "session", cwd=workspace)
    assert table.returncode == 0 and "alpha" in table.stdout and "total" in table.stdout


def test_usage_without_prices_has_no_cost_and_old_runs_can_be_left_out(
    tmp_path: Path, workspace: Path
) -> None:
    assert run_json(tmp_path, workspace, READ_NOTES)[0] == 0
    rows = usage_rows(workspace)
    assert rows["total"]["runs"] == 1 and rows["total"]["cost"] is None
    future = usage_rows(workspace, "--since", "2999-01-01")
    assert future["total"]["runs"] == 0


def test_run_budget_stops_before_the_next_model_call_not_in_a_tool_call(
    tmp_path: Path, workspace: Path
) -> None:
    configure("[budgets]\nrun_tokens = 5\n")
    code, events = run_json(tmp_path, workspace, READ_NOTES)
    assert code == 1
    kinds = [e["type"] for e in events]
    # The first reply's tool call ran to its result; the second model call never happened.
    assert kinds == ["step", "tool_call", "tool_result", "error", "usage"]
    assert one(events, "tool_result")["ok"] is True
    error = one(events, "error")
    assert error["reason"] == "budget" and "[budgets] run_tokens = 5" in error["message"]
    assert one(events, "usage")["steps"] == 1
    outcome = trace_of(events).outcome
    assert outcome["outcome"] == "error" and outcome["reason"] == "budget"


def test_day_budget_counts_earlier_runs_and_then_refuses_to_start(
    tmp_path: Path, workspace: Path
) -> None:
    code, events = run_json(tmp_path, workspace, READ_NOTES)
    assert code == 0
    earlier = one(events, "usage")
    spent = earlier["prompt_tokens"] + earlier["completion_tokens"]
    # Room for one more model call today, not for two.
    configure(f"[budgets]\nday_tokens = {spent + 1}\n")
    code, events = run_json(tmp_path, workspace, READ_NOTES)
    assert code == 1
    assert one(events, "error")["reason"] == "budget"
    assert "[budgets] day_tokens" in one(events, "error")["message"]
    assert one(events, "usage")["steps"] == 1
    # Now the day's budget is spent: the next run makes no model call at all.
    code, events = run_json(tmp_path, workspace, READ_NOTES)
    assert code == 1
    assert [e["type"] for e in events] == ["error", "usage"]
    assert one(events, "usage")["steps"] == 0
    assert "today's runs" in one(events, "error")["message"]


@pytest.mark.parametrize(
    ("tool", "arguments", "reason", "message"),
    [
        (
            "files_read",
            {"path": "missing.txt"},
            "repeated_error",
            "stopped: files_read on missing.txt kept failing with the same error (3 times): "
            "error: cannot open 'missing.txt': No such file or directory",
        ),
        (  # a command that exits 1 is a result, not an error: the same result three times
            "shell",
            {"command": "cat missing.txt"},
            "repeated_call",
            "stopped: shell on cat missing.txt kept giving the same result (3 times)",
        ),
    ],
)
def test_guards_stop_a_run_that_repeats_itself(
    tmp_path: Path, workspace: Path, tool: str, arguments: dict, reason: str, message: str
) -> None:
    configure("[guards]\nenabled = true\n")
    again = [{"tool_calls": [{"name": tool, "arguments": arguments}]}]
    code, events = run_json(tmp_path, workspace, again * 5 + ["never reached"])
    assert code == 1
    error = one(events, "error")
    assert (error["reason"], error["message"]) == (reason, message)
    assert one(events, "usage")["steps"] == 3
    outcome = trace_of(events).outcome
    assert outcome["reason"] == reason and outcome["detail"] == f"{reason}: {message}"


def test_guards_are_off_by_default_for_other_profiles(tmp_path: Path, workspace: Path) -> None:
    failing = [{"tool_calls": [{"name": "shell", "arguments": {"command": "cat missing.txt"}}]}]
    code, events = run_json(tmp_path, workspace, failing * 5, "--max-steps", "4")
    assert code == 1 and one(events, "error")["reason"] == "max_steps"


def test_a_guard_limit_of_one_is_refused(workspace: Path) -> None:
    configure("[guards]\nrepeated_error = 1\n")
    out = agent("usage", cwd=workspace)
    assert out.returncode == 2 and "guards.repeated_error" in out.stderr
