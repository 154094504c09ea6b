"""``run_command``, the small profile's general path: real commands in the real sandbox, the bare
output back, and the shell's permission rules in front of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.errors import ToolError
from agent.tools import Toolbox
from cli.approvals import AutoApprover, DenyApprover
from sandbox.settings import ResourceLimits, SandboxSettings
from skills.context import Places, SkillContext
from skills.toolbox import build_toolbox


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "costs.txt").write_text("12\n7\n30\n5\n")
    (ws / "people.csv").write_text("name,age\nada,36\nbob,41\n")
    return ws


def toolbox(ws: Path, approver=None) -> Toolbox:  # type: ignore[no-untyped-def]
    context = SkillContext.create(
        ws,
        SandboxSettings(limits=ResourceLimits(timeout_s=5, output_bytes=4000)),
        places=Places(audit_path=ws.parent / "audit.jsonl"),
    )
    return build_toolbox(context, approver or AutoApprover(), ["simple"])


def run(tb: Toolbox, command: str) -> tuple[bool, str]:
    tool = tb.get("run_command")
    assert tool is not None
    try:
        result = tool.call({"command": command})
    except ToolError as exc:
        return False, str(exc)
    return not result.is_error, result.render()


def test_the_bare_output_of_a_composed_command(ws: Path) -> None:
    tb = toolbox(ws)
    assert run(tb, "awk '{s+=$1} END {print s}' costs.txt") == (True, "54")
    assert run(tb, "tail -n +2 people.csv | wc -l") == (True, "2")
    assert run(tb, "sort -n costs.txt | head -n 1") == (True, "5")


def test_no_output_no_match_and_failure_read_differently(ws: Path) -> None:
    tb = toolbox(ws)
    assert run(tb, "mkdir -p out/logs") == (True, "Done (no output).")
    assert (ws / "out" / "logs").is_dir()
    assert run(tb, "grep zebra costs.txt") == (True, "No match (nothing printed).")
    assert run(tb, "grep -c zebra costs.txt") == (True, "0")
    ok, text = run(tb, "cat missing.txt")
    assert ok and text.startswith("The command failed (exit code 1): cat: missing.txt")


def test_it_runs_in_the_sandbox_and_behind_the_shell_rules(ws: Path) -> None:
    ok, text = run(toolbox(ws), "touch /etc/clawloop-probe; echo $?")
    assert ok and text.endswith("1") and not Path("/etc/clawloop-probe").exists()
    # awk may write files, so it asks; with no one to ask it is refused and nothing runs.
    ok, text = run(toolbox(ws, DenyApprover()), "awk 'BEGIN {print 1 > \"made.txt\"}'")
    assert not ok and "declined" in text and not (ws / "made.txt").exists()
    # sort, like cat and wc, reads without asking (a pipeline asks, as in the shell tool).
    assert run(toolbox(ws, DenyApprover()), "sort -n costs.txt") == (True, "5\n7\n12\n30")
    assert not run(toolbox(ws, DenyApprover()), "sort costs.txt | head -n 1")[0]
