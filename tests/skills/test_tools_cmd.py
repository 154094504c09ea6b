"""``agent tools list/call``, ``agent audit`` and the approvers, without a model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

import cli.tools_cmd as tools_cmd
from cli.approvals import AutoApprover, DenyApprover, TerminalApprover, choose_approver
from cli.audit_cmd import show_audit
from cli.config import BackendOptions, Settings
from skills.guard import ApprovalRequest


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """The CLI's real settings, with a credential in the config to redact."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "readme.md").write_text("token is tg-token-abcdef\n")
    return Settings(
        workspace=ws,
        data_dir=tmp_path / "data",
        backends={"openai": BackendOptions(api_key="tg-token-abcdef")},
    )


def console() -> Console:
    return Console(record=True, width=200, force_terminal=False)


def test_call_prints_decision_and_redacted_result(settings: Settings) -> None:
    out = console()
    code = tools_cmd.call_tool(settings, "files_read", '{"path": "readme.md"}', DenyApprover(), out)
    text = out.export_text()
    assert code == 0
    assert "decision: allow (rule `files.read`)" in text
    assert "token is [redacted]" in text and "tg-token-abcdef" not in text


def test_call_checks_a_rule_without_a_model(settings: Settings) -> None:
    out = console()
    code = tools_cmd.call_tool(
        settings, "shell", '{"command": "rm -rf ~"}', AutoApprover(), out, as_json=True
    )
    data = json.loads(out.export_text())
    assert code == 1
    assert data["decision"] == "deny" and data["reason"] == "rule `shell(rm * ~ *)`"
    assert data["result"].startswith("error: denied by rule")


def test_list_shows_every_tool_with_schema_and_origin(settings: Settings) -> None:
    out = console()
    tools_cmd.list_tools(settings, out, as_json=True)
    data = {t["name"]: t for t in json.loads(out.export_text())}
    assert set(data) == {
        "shell",
        "files_read",
        "files_write",
        "files_edit",
        "files_list",
        "files_search",
        "remember",
        "recall",
        "forget",
        "search_sessions",
    }
    assert data["files_edit"]["rule"] == "files.edit" and data["shell"]["source"] == "builtin"
    assert data["files_edit"]["parameters"]["required"] == ["path", "old_text", "new_text"]


def test_typer_app_and_audit(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools_cmd, "_settings", lambda sandbox: settings)
    result = CliRunner().invoke(tools_cmd.tools_app, ["call", "shell", '{"command": "ls"}'])
    assert result.exit_code == 0, result.output
    assert "decision: allow (rule `shell(ls *)`)" in result.output and "readme.md" in result.output
    result = CliRunner().invoke(tools_cmd.tools_app, ["call", "shell", '{"command": "whoami"}'])
    assert result.exit_code == 1 and "the user declined" in result.output  # no TTY: deny
    out = console()
    show_audit(settings.audit_path, 5, out)
    text = out.export_text()
    assert "rule `shell(ls *)`" in text and "no one to ask: deny" in text


def test_terminal_approver_saves_always_through_add_rule() -> None:
    saved: list[tuple[str, str]] = []

    def add_rule(kind: str, pattern: str) -> Path:
        saved.append((kind, pattern))
        return Path("/tmp/config.toml")

    answers = iter(["a", "o", "d", ""])
    approver = TerminalApprover(console(), add_rule=add_rule, prompt=lambda q: next(answers))
    request = ApprovalRequest("shell", "shell", {"command": "make"}, "default", "shell(make)")
    got: list[Any] = [approver.ask(request) for _ in range(4)]
    assert got == ["always", "once", "deny", "deny"]
    assert saved == [("allow", "shell(make)")]
    assert isinstance(choose_approver(yes=True), AutoApprover)
    assert isinstance(choose_approver(json_output=True), DenyApprover)
