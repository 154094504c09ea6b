"""A SKILL.md skill's scripts held to its manifest by the OS sandbox: its hosts, its write paths.

The skills are installed with consent and run through ``skill_run`` in the agent loop, under
real bubblewrap; the servers are real HTTP servers on the host's 127.0.0.1.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from rich.console import Console
from web_servers import WebServer

from agent.loop import AgentLoop
from agent.messages import AssistantMessage, ToolCall
from agent.session import Session
from backends.fake import FakeBackend
from cli.approvals import AutoApprover
from cli.config import Settings
from cli.skills_cmd import Skills, install
from sandbox.settings import SandboxSettings
from skills.context import SkillContext
from skills.toolbox import build_toolbox


def make_settings(tmp_path: Path) -> Settings:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.md").write_text("my notes\n")
    sandbox = SandboxSettings(allow=["skills.run"])
    return Settings(workspace=ws, data_dir=tmp_path / "data", sandbox=sandbox)


def install_skill(tmp_path: Path, settings: Settings, manifest: str, script: str) -> None:
    folder = tmp_path / "src" / "probe"
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: probe\ndescription: Probe the sandbox.\npermissions:\n"
        f"{textwrap.indent(manifest, '  ')}---\nRun scripts/probe.sh.\n"
    )
    (folder / "scripts" / "probe.sh").write_text("#!/bin/bash\n" + textwrap.dedent(script))
    out = Console(record=True, width=200)
    assert install(Skills(settings), str(folder), out, lambda _q: True) == 0, out.export_text()


def run_probe(settings: Settings, args: list[str]) -> Any:
    toolbox = build_toolbox(SkillContext.from_settings(settings), AutoApprover())
    arguments = {"skill": "probe", "script": "scripts/probe.sh", "args": args}
    call = ToolCall.make("skill_run", arguments)
    backend = FakeBackend([AssistantMessage(tool_calls=[call]), AssistantMessage(content="done")])
    session = Session.open(settings.data_dir / "s.jsonl")
    events = list(AgentLoop(backend, toolbox).run(session, "probe"))
    (result,) = [e for e in events if getattr(e, "type", "") == "tool_result"]
    return result


def test_a_skill_reaches_its_declared_host_and_nothing_else(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    with WebServer("A") as a, WebServer("B") as b:
        install_skill(
            tmp_path,
            settings,
            f'commands: [curl, python3]\nnetwork: ["127.0.0.1:{a.port}"]\n',
            """
            curl -sf "http://127.0.0.1:$1/from-skill"; echo "a: $?"
            curl -sf "http://127.0.0.1:$2/from-skill"; echo "b: $?"
            python3 -c 'import sys, urllib.request
            url = "http://127.0.0.1:%s/from-urllib" % sys.argv[1]
            print("urllib:", urllib.request.urlopen(url, timeout=5).read().decode().strip())' "$1"
            python3 -c 'import socket, sys
            try:
                socket.create_connection(("127.0.0.1", int(sys.argv[1])), 3)
                print("raw b: connected")
            except OSError as exc:
                print("raw b:", type(exc).__name__)' "$2"
            """,
        )
        result = run_probe(settings, [str(a.port), str(b.port)])
        paths_a, paths_b = list(a.paths), list(b.paths)
    assert result.ok, result.content
    assert "hello from A\na: 0" in result.content
    assert "b: 22" in result.content  # curl -f: the proxy's 403
    # No route out but the proxy: a direct connection is refused inside the sandbox's namespace.
    assert "raw b: ConnectionRefusedError" in result.content
    assert f"network refused: 127.0.0.1:{b.port}" in result.content
    assert "urllib: hello from A" in result.content  # Python's urllib honours http_proxy too
    assert paths_a == ["/from-skill", "/from-urllib"] and paths_b == []


def test_a_skill_without_hosts_gets_no_network(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    with WebServer("A") as a:
        script = 'curl -sf "http://127.0.0.1:$1/"; echo "a: $?"\n'
        install_skill(tmp_path, settings, "commands: [curl]\n", script)
        result = run_probe(settings, [str(a.port)])
        assert a.paths == []
    assert "a: 7" in result.content


def test_a_skill_writes_only_its_declared_paths(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    install_skill(
        tmp_path,
        settings,
        'commands: [mkdir]\nread: ["**"]\nwrite: ["out/**"]\n',
        """
        mkdir -p out/day1 && echo report > out/day1/report.txt; echo "inside: $?"
        echo tampered > notes.md; echo "notes: $?"
        echo planted > planted.sh; echo "new: $?"
        """,
    )
    result = run_probe(settings, [])
    assert "inside: 0" in result.content and "notes: 1" in result.content, result.content
    assert "new: 1" in result.content
    ws = settings.workspace
    assert (ws / "out" / "day1" / "report.txt").read_text() == "report\n"
    assert (ws / "notes.md").read_text() == "my notes\n"
    assert not (ws / "planted.sh").exists()


def test_a_bad_network_host_is_a_load_problem(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    folder = settings.data_dir / "skills" / "broken"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: broken\ndescription: d\npermissions:\n  network: ['http://x.org/']\n---\n"
    )
    problems = Skills(settings).discover().problems
    assert any("permissions.network" in p and "not a host name" in p for p in problems), problems
