"""The files and shell skills through the real toolbox (guarded, sandboxed, redacted)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent.errors import ToolError, UserError
from agent.tools import Toolbox
from cli.approvals import AutoApprover, DenyApprover
from sandbox.settings import ResourceLimits, SandboxSettings
from skills.context import Places, SkillContext
from skills.toolbox import build_toolbox, build_tools


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("one\ntwo\nthree\n")
    return ws


def toolbox(ws: Path, approver=None, **settings) -> Toolbox:  # type: ignore[no-untyped-def]
    limits = ResourceLimits(timeout_s=5, output_bytes=2000)
    context = SkillContext.create(
        ws,
        SandboxSettings(limits=limits, **settings),
        places=Places(audit_path=ws.parent / "audit.jsonl"),
        secrets=["sk-live-abcdef123"],
    )
    return build_toolbox(context, approver or AutoApprover())


def call(tb: Toolbox, name: str, **args: object) -> str:
    tool = tb.get(name)
    assert tool is not None
    return tool.call(args).render()


def test_the_builtin_tools_and_their_rule_names(ws: Path) -> None:
    context = SkillContext.create(ws)
    tools = build_tools(context)
    names = {t.name: (t.rule_target.name, source) for t, source in tools}  # type: ignore[attr-defined]
    assert names == {
        "shell": ("shell", "builtin"),
        "files_read": ("files.read", "builtin"),
        "files_write": ("files.write", "builtin"),
        "files_edit": ("files.edit", "builtin"),
        "files_list": ("files.list", "builtin"),
        "files_search": ("files.search", "builtin"),
    }
    with pytest.raises(
        UserError, match="known skills: files, mail, memory, reader, recipes, shell, simple, web"
    ):
        build_tools(context, ["shell", "nope"])


def test_read_write_edit_list_search(ws: Path) -> None:
    tb = toolbox(ws)
    assert call(tb, "files_read", path="notes.txt") == "one\ntwo\nthree\n"
    assert "lines 2-2 of 3" in call(tb, "files_read", path="notes.txt", offset=2, limit=1)
    assert "wrote" in call(tb, "files_write", path="src/new.py", content="x = 1\nx = 1\n")
    with pytest.raises(ToolError, match="occurs 2 times"):
        call(tb, "files_edit", path="src/new.py", old_text="x = 1", new_text="y")
    with pytest.raises(ToolError, match="not found"):
        call(tb, "files_edit", path="src/new.py", old_text="zzz", new_text="y")
    call(tb, "files_edit", path="src/new.py", old_text="x = 1\nx", new_text="y = 2\nx")
    assert (ws / "src" / "new.py").read_text() == "y = 2\nx = 1\n"
    assert call(tb, "files_list", recursive=True).splitlines() == [
        "notes.txt",
        "src/",
        "src/new.py",
    ]
    assert call(tb, "files_search", pattern=r"^t", glob="*.txt") == (
        "notes.txt:2: two\nnotes.txt:3: three"
    )
    with pytest.raises(ToolError, match="invalid regular expression"):
        call(tb, "files_search", pattern="(")


def test_file_results_are_redacted(ws: Path) -> None:
    (ws / "key.txt").write_text("API_KEY=sk-live-abcdef123\n")
    tb = toolbox(ws)
    assert call(tb, "files_read", path="key.txt") == "API_KEY=[redacted]\n"
    assert "[redacted]" in call(tb, "shell", command="cat key.txt")
    audit = (ws.parent / "audit.jsonl").read_text()
    assert "sk-live-abcdef123" not in audit


def test_shell_runs_sandboxed_with_exit_code_and_bounded_output(ws: Path) -> None:
    tb = toolbox(ws)
    out = call(tb, "shell", command="echo hi; echo oops >&2; exit 3")
    assert out == "exit code: 3\nstdout:\nhi\nstderr:\noops"
    out = call(tb, "shell", command="seq 1 100000")
    assert "output truncated" in out and len(out) < 4000 and "100000" in out
    with pytest.raises(ToolError, match="did not finish within 1 s"):
        call(tb, "shell", command="sleep 20", timeout_s=1)
    expected_uid = 65534 if os.geteuid() == 0 else os.geteuid()  # root drops to nobody
    assert f"id={expected_uid}" in call(tb, "shell", command="echo id=$(id -u)")


def test_read_only_mode(ws: Path) -> None:
    tb = toolbox(ws, mode="read-only")
    with pytest.raises(ToolError, match="read-only mode"):
        call(tb, "files_write", path="x.txt", content="x")
    out = call(tb, "shell", command="touch x.txt")
    assert "exit code: 1" in out and not (ws / "x.txt").exists()


def test_refusals_are_tool_errors_and_audited(ws: Path) -> None:
    tb = toolbox(ws, approver=DenyApprover(), deny=["files.write(secret/**)"])
    with pytest.raises(ToolError, match=r"denied by rule `shell\(rm \* ~ \*\)`"):
        call(tb, "shell", command="rm -rf ~")
    with pytest.raises(ToolError, match="the user declined"):
        call(tb, "shell", command="python3 -c 'print(1)'")
    with pytest.raises(ToolError, match=r"denied by rule `files.write\(secret/\*\*\)`"):
        call(tb, "files_write", path="secret/a", content="x")
    entries = [json.loads(line) for line in (ws.parent / "audit.jsonl").read_text().splitlines()]
    assert [(e["decision"], e["decided_by"], e["outcome"]) for e in entries] == [
        ("deny", "rule `shell(rm * ~ *)`", "refused"),
        ("ask", "no one to ask: deny", "refused"),
        ("deny", "rule `files.write(secret/**)`", "refused"),
    ]


def test_always_allows_the_same_call_again_without_asking(ws: Path) -> None:
    asked: list[str] = []

    class Once:
        name = "user"

        def ask(self, request):  # type: ignore[no-untyped-def]
            asked.append(request.rule)
            return "always"

    tb = toolbox(ws, approver=Once())
    call(tb, "shell", command="python3 -c 'print(2)'")
    call(tb, "shell", command="python3 -c 'print(2)'")
    call(tb, "shell", command="python3 -c 'print(3)'")
    assert asked == ["shell(python3 -c 'print(2)')", "shell(python3 -c 'print(3)')"]
