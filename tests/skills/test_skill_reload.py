"""Hot reload in the running front ends: a skill dropped in, tampered with, approved again.

The chat front end's toolbox and loop are built by the same wiring ``agent chat`` uses and
driven with the scripted fake backend; the gateway is the real ``agent gateway`` process
against the local fake Telegram server, and what each of its turns offered the model is read
back from that turn's trace.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fake_telegram import TOKEN, FakeTelegram
from loopthread import wait_for
from rich.console import Console

from agent.session import Session
from backends.fake import FakeBackend
from cli.config import Settings
from cli.skills_cmd import Skills, approve
from cli.wiring import build_loop, settings_toolbox
from sandbox.settings import SandboxSettings
from skills.toolbox import LiveToolbox

ROOT = Path(__file__).resolve().parents[2]
OWNER = 111
GREETER = '''
from agent.plugins import hookimpl
from agent.tools import function_tool
from skills.skill import Permissions, Skill


def start(context):
    def greeter_hello(name: str) -> str:
        """Say hello{extra}."""
        return "hello " + name

    return [function_tool(greeter_hello)]


@hookimpl
def register_skills(register):
    register(Skill("greeter", start, "Greets.", permissions=Permissions()))
'''


def approve_now(settings: Settings, name: str) -> None:
    """What ``agent skills approve NAME --yes`` does."""
    out = Console(record=True, width=200)
    assert approve(Skills(settings), name, out, lambda _q: True) == 0, out.export_text()


def wait_until(check: Callable[[], Any], what: str, notices: list[str]) -> None:
    deadline = time.monotonic() + 15
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; notices: {notices}")
        time.sleep(0.05)


def test_the_chat_loop_offers_a_new_skill_next_turn_and_drops_a_tampered_one(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    settings = Settings(
        backend="fake", workspace=ws, data_dir=tmp_path / "data", sandbox=SandboxSettings()
    )
    notices: list[str] = []
    toolbox = settings_toolbox(settings, None, notices.append)
    backend = FakeBackend(when_done="ok")
    loop = build_loop(settings, backend, toolbox)
    session = Session.open(tmp_path / "chat.jsonl")

    def next_turn_offers() -> list[str]:
        list(loop.run(session, "hi"))
        return [spec.function.name for spec in backend.requests[-1].tools or []]

    assert isinstance(toolbox, LiveToolbox)
    try:
        assert "greeter_hello" not in next_turn_offers()
        folder = settings.data_dir / "skills"
        (folder / "greeter.py").write_text(GREETER.format(extra=""))
        wait_until(lambda: any("greeter (new)" in n for n in notices), "the new skill", notices)
        assert "greeter_hello" not in next_turn_offers()  # new: waiting for approval
        approve_now(settings, "greeter")
        wait_until(lambda: "greeter_hello" in toolbox.names(), "the approved skill", notices)
        assert "greeter_hello" in next_turn_offers()
        (folder / "greeter.py").write_text(GREETER.format(extra=" (and more)"))  # tampered
        wait_until(lambda: "greeter_hello" not in toolbox.names(), "the change", notices)
        assert "greeter_hello" not in next_turn_offers()
        assert "greeter (changed)" in notices[-1]
        approve_now(settings, "greeter")
        wait_until(lambda: "greeter_hello" in toolbox.names(), "the re-approval", notices)
        assert "greeter_hello" in next_turn_offers()
        # An instruction skill is listed in the system prompt of the sessions that start now.
        (folder / "notes").mkdir()
        (folder / "notes" / "SKILL.md").write_text(
            "---\nname: notes\ndescription: Keep notes tidy.\n---\nSort them.\n"
        )
        approve_now(settings, "notes")
        wait_until(lambda: "skill_read" in toolbox.names(), "the instruction skill", notices)
        assert loop.system_prompt is not None and "- notes: Keep notes tidy." in loop.system_prompt
    finally:
        toolbox.close()


def test_the_gateway_process_picks_up_skills_without_a_restart(
    fake: FakeTelegram, isolated_home: Path, ws: Path
) -> None:
    data = isolated_home / "data"
    script = isolated_home / "script.json"
    script.write_text(json.dumps(["one", "two", "three", "four"]))
    (isolated_home / "config.toml").write_text(
        f'backend = "fake"\nworkspace = "{ws}"\n\n[backends.fake]\nscript = "{script}"\n\n'
        f'[connectors.telegram]\nenabled = true\nbase_url = "{fake.base_url}"\n'
        f"owner_ids = [{OWNER}]\npoll_timeout = 1\n"
    )
    env = dict(os.environ)
    env.update(
        CLAWLOOP_CONFIG=str(isolated_home / "config.toml"),
        CLAWLOOP_DATA_DIR=str(data),
        CLAWLOOP_TELEGRAM_TOKEN=TOKEN,
    )
    settings = Settings(workspace=ws, data_dir=data)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "gateway"],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    log: list[str] = []
    reader = threading.Thread(target=lambda: log.extend(iter(proc.stderr.readline, "")))  # type: ignore[union-attr]
    reader.start()

    def turn(text: str, answer: str) -> list[str]:
        """Say ``text``, wait for the answer, and return the tools that turn offered."""
        fake.say(OWNER, OWNER, text)
        wait_for(lambda: answer in [s.text for s in fake.replies(OWNER)], 60, answer)
        for path in (data / "traces").glob("*.jsonl"):
            start = json.loads(path.read_text().splitlines()[0])
            if start.get("task") == text:
                return [t["function"]["name"] for t in start["tools"]]
        raise AssertionError(f"no trace for {text!r}")

    try:
        assert "greeter_hello" not in turn("first", "one")
        (data / "skills").mkdir(exist_ok=True)
        (data / "skills" / "greeter.py").write_text(GREETER.format(extra=""))
        approve_now(settings, "greeter")  # dropped in and approved: one or two reloads
        wait_for(lambda: any("+greeter_hello" in line for line in log), 30, "the new skill")
        assert "greeter_hello" in turn("second", "two")
        (data / "skills" / "greeter.py").write_text(GREETER.format(extra=" (and more)"))
        wait_for(lambda: any("-greeter_hello" in line for line in log), 30, "the change")
        assert any("greeter (changed)" in line for line in log)
        assert "greeter_hello" not in turn("third", "three")
        approve_now(settings, "greeter")
        wait_for(lambda: sum("+greeter_hello" in line for line in log) >= 2, 30, "re-approval")
        assert "greeter_hello" in turn("fourth", "four")
    finally:
        proc.terminate()
        proc.wait(20)
        reader.join(5)
    assert proc.returncode == 0, "".join(log[-20:])
