"""The workspace path resolver, secrets and redaction, the audit log, and the runner's edges."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from agent.errors import ToolError, UserError
from sandbox.audit import AuditEntry, AuditLog, read_recent
from sandbox.paths import PathResolver, clawloop_dirs
from sandbox.runner import SandboxRunner
from sandbox.secrets import Redactor, find_secrets
from sandbox.settings import ResourceLimits, SandboxSettings


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.txt").write_text("a\n")
    (tmp_path / "outside.txt").write_text("secret outside\n")
    return ws


def resolver(ws: Path, tmp_path: Path) -> PathResolver:
    return PathResolver(ws, protected_dirs=[ws / "cfg-clawloop"])


@pytest.mark.parametrize(
    "path", ["../outside.txt", "src/../../outside.txt", "/etc/passwd", "~/.ssh/id_rsa", "", "a\0b"]
)
def test_paths_leaving_the_workspace_are_refused(ws: Path, tmp_path: Path, path: str) -> None:
    with pytest.raises(ToolError):
        resolver(ws, tmp_path).resolve(path)


def test_links_out_are_refused(ws: Path, tmp_path: Path) -> None:
    (ws / "out").symlink_to(tmp_path)
    (ws / "o.txt").symlink_to(tmp_path / "outside.txt")
    os.link(tmp_path / "outside.txt", ws / "hard.txt")
    r = resolver(ws, tmp_path)
    for path in ("out/outside.txt", "o.txt"):
        with pytest.raises(ToolError, match="outside the workspace"):
            r.resolve(path)
    with pytest.raises(ToolError, match="hard links"):
        r.resolve("hard.txt")
    inside = r.resolve("src/a.txt")
    assert inside == (ws / "src" / "a.txt").resolve()


def test_open_refuses_a_link_swapped_in_after_resolving(ws: Path, tmp_path: Path) -> None:
    r = resolver(ws, tmp_path)
    resolved = r.resolve("src/a.txt")
    (ws / "src" / "a.txt").unlink()
    (ws / "src" / "a.txt").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(ToolError):
        r.open(resolved, os.O_RDONLY)


@pytest.mark.parametrize(
    "path",
    [
        ".git/hooks/pre-commit",
        ".git/config",
        "sub/.git/hooks/x",
        ".bashrc",
        "a/.zshrc",
        ".profile",
    ],
)
def test_protected_paths_are_never_written(ws: Path, tmp_path: Path, path: str) -> None:
    r = resolver(ws, tmp_path)
    with pytest.raises(ToolError, match="protected"):
        r.resolve(path, for_write=True)
    r.resolve(path)  # reading them is fine


def test_clawloop_folders_are_neither_read_nor_written(ws: Path, tmp_path: Path) -> None:
    # The shell sees an empty folder there, so the files tools show nothing either.
    r = resolver(ws, tmp_path)
    for for_write in (True, False):
        with pytest.raises(ToolError, match="hidden from the sandbox"):
            r.resolve("cfg-clawloop/config.toml", for_write=for_write)


def test_secrets_are_found_and_redacted() -> None:
    config = {
        "telegram": {"bot_token": "123456:ABCDEF"},
        "mail": {"password": "hunter2-x"},
        "model": {"name": "smollm2"},
        "openai_api_key": "sk-test-000111",
    }
    env = {
        "CLAWLOOP_DISCORD_TOKEN": "disc-tok-999",
        "CLAWLOOP_MAIL_PASSWORD": "pw-123456",
        "HOME": "/root",
        "CLAWLOOP_MODEL": "smollm2-135m",
    }
    secrets = find_secrets(config, env)
    assert set(secrets) == {
        "123456:ABCDEF",
        "hunter2-x",
        "sk-test-000111",
        "disc-tok-999",
        "pw-123456",
    }
    r = Redactor(secrets)
    assert r.redact("token=123456:ABCDEF and pw-123456!") == "token=[redacted] and [redacted]!"
    assert r.redact_obj({"a": ["sk-test-000111"]}) == {"a": ["[redacted]"]}
    assert Redactor(["ab"]).redact("ab cab") == "ab cab"  # too short to be a credential


def test_audit_log_is_redacted_jsonl(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl", Redactor(["very-secret-value"]))
    for i in range(5):
        log.record(
            AuditEntry(
                f"t{i}",
                {"command": "echo very-secret-value"},
                "allow",
                "rule `shell(echo *)`",
                "ok",
                "printed very-secret-value",
            )
        )
    recent = read_recent(tmp_path / "audit.jsonl", 3)
    assert [e["tool"] for e in recent] == ["t2", "t3", "t4"]
    text = (tmp_path / "audit.jsonl").read_text()
    assert "very-secret-value" not in text and "[redacted]" in text


def test_off_backend_clears_the_environment_and_kills_the_group(ws: Path) -> None:
    settings = SandboxSettings(backend="off", limits=ResourceLimits(timeout_s=1))
    runner = SandboxRunner(settings, ws, {"CLAWLOOP_TOKEN": "tok-123456", "LANG": "C.UTF-8"})
    result = runner.run(["bash", "-c", "env"])
    assert "tok-123456" not in result.stdout and "LANG=C.UTF-8" in result.stdout
    began = time.monotonic()
    result = runner.run(["bash", "-c", "sleep 30 & sleep 30"])
    assert result.timed_out and time.monotonic() - began < 5


def test_missing_bubblewrap_refuses_instead_of_running_unsandboxed(
    ws: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    runner = SandboxRunner(SandboxSettings(), ws)
    with pytest.raises(UserError, match="apt-get install bubblewrap"):
        runner.check()
    with pytest.raises(ToolError, match="apt-get install bubblewrap"):
        runner.run(["touch", "ran-anyway"])
    assert not (ws / "ran-anyway").exists()


def test_a_moved_cache_folder_is_protected_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CLAWLOOP_CACHE_DIR", raising=False)
    defaults = clawloop_dirs()
    assert len(defaults) == 3  # config, data and cache
    monkeypatch.setenv("CLAWLOOP_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert clawloop_dirs() == [*defaults, tmp_path / "elsewhere"]
