"""MCP servers as skills, over stdio (sandboxed) and streamable HTTP, used from the agent loop.

The server is examples/mcp-server/server.py, run with the official ``mcp`` package.
"""

from __future__ import annotations

import os
import site
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mail_servers import free_port, wait_for_port

from agent.loop import AgentLoop
from agent.messages import AssistantMessage, ToolCall
from agent.session import Session
from agent.tools import Toolbox
from backends.fake import FakeBackend
from cli.approvals import AutoApprover
from cli.config import Settings
from sandbox.settings import SandboxSettings
from skills.context import SkillContext
from skills.mcp.config import McpServer
from skills.toolbox import SkillSet, guard

SERVER = Path(__file__).resolve().parents[2] / "examples" / "mcp-server" / "server.py"
SITE = site.getsitepackages()[0]


def sandbox_python() -> str:
    """An interpreter the unprivileged sandbox user can run: ours, or the system's if ours
    lives under a folder that user cannot enter (then the venv's packages come by PYTHONPATH)."""
    real = Path(os.path.realpath(sys.executable))
    if os.geteuid() != 0 or all(p.stat().st_mode & stat.S_IXOTH for p in real.parents):
        return sys.executable
    system = Path("/usr/bin/python3")
    assert system.exists(), "no interpreter the sandbox user can run"
    return str(system)


def loop_with(tmp_path: Path, servers: dict[str, McpServer], environ: dict[str, str], **kw: Any):  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    settings = Settings(workspace=ws, data_dir=tmp_path / "data", mcp=servers, **kw)
    context = SkillContext.from_settings(settings, environ=environ)
    skillset = SkillSet(context, list(servers))
    skillset.load()
    return skillset, Toolbox(guard(skillset, AutoApprover()))


def run(toolbox: Toolbox, *pairs: tuple[str, dict[str, Any]]) -> list[Any]:
    turns: list[Any] = [AssistantMessage(tool_calls=[ToolCall.make(n, a)]) for n, a in pairs]
    events = AgentLoop(FakeBackend([*turns, AssistantMessage(content="ok")]), toolbox).run(
        Session(), "use the server"
    )
    return [e for e in events if getattr(e, "type", "") == "tool_result"]


def test_a_stdio_server_runs_sandboxed_with_only_its_declared_environment(tmp_path: Path) -> None:
    # The script and the packages it imports are declared readable: a checkout under /tmp or a
    # home folder is otherwise out of the sandbox's view.
    server = McpServer(
        command=[sandbox_python(), str(SERVER)],
        env=["PYTHONPATH", "NOTES_LABEL"],
        read=[str(SERVER.parent), SITE],
    )
    environ = {"PYTHONPATH": SITE, "NOTES_LABEL": "x", "OPENAI_API_KEY": "sk-not-for-servers"}
    skillset, toolbox = loop_with(
        tmp_path,
        {"notes": server},
        environ,
        sandbox=SandboxSettings(deny=["mcp.notes.remember"]),
    )
    try:
        assert {"notes_add", "notes_remember", "notes_environment", "notes_fail"} <= set(
            toolbox.names()
        )
        added, env, failed, denied = run(
            toolbox,
            ("notes_add", {"a": 2, "b": 40}),
            ("notes_environment", {}),
            ("notes_fail", {"reason": "the disk is full"}),
            ("notes_remember", {"text": "x"}),
        )
        assert added.ok and "42" in added.content and "<untrusted-content>" in added.content
        names = set(env.content.split("\n")[2].split(", "))
        assert {"NOTES_LABEL", "PYTHONPATH", "PATH", "HOME"} <= names
        assert "OPENAI_API_KEY" not in env.content and "USER" not in names
        assert not failed.ok and "the disk is full" in failed.content
        assert not denied.ok and "denied by rule `mcp.notes.remember`" in denied.content
    finally:
        skillset.close()


@pytest.fixture
def http_server() -> Iterator[int]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, timeout=30)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_streamable_http_server(tmp_path: Path, http_server: int) -> None:
    url = f"http://127.0.0.1:{http_server}/mcp"
    skillset, toolbox = loop_with(tmp_path, {"notes": McpServer(url=url)}, {})
    try:
        added, noted, again = run(
            toolbox,
            ("notes_add", {"a": 1, "b": 2}),
            ("notes_remember", {"text": "buy milk"}),
            ("notes_remember", {"text": "call bob"}),
        )
        assert added.ok and "3" in added.content
        # One long-lived session: the server keeps its state between calls.
        assert noted.ok and "noted (1 notes)" in noted.content
        assert again.ok and "noted (2 notes)" in again.content
        assert skillset.skills["notes"].source == f"mcp {url}"
    finally:
        skillset.close()


def test_a_server_that_cannot_start_is_one_clear_error(tmp_path: Path) -> None:
    from agent.errors import UserError

    with pytest.raises(UserError, match="MCP server 'gone' could not be started or reached"):
        loop_with(tmp_path, {"gone": McpServer(url=f"http://127.0.0.1:{free_port()}/mcp")}, {})
