"""The web page inside `agent gateway`: a real gateway process with ``[connectors.web]``
enabled (and no chat bot), its page reached over HTTP on 127.0.0.1, its turn run by the
gateway's loop on the scripted fake backend; and the page sharing the gateway's "always"
rules both ways."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from cli.config import load_settings
from cli.web_cmd import page_app
from cli.wiring import build_loop, settings_toolbox
from tests.connectors.harness import fake_backend
from tests.web_ui.conftest import free_port, serve, stop
from tests.web_ui.test_web_security import page_tokens

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "a-long-random-page-token-for-this-test"
STARTUP_S = 60.0


def start_gateway(home: Path, ws: Path, port: int) -> subprocess.Popen[str]:
    script = home / "script.json"
    script.write_text(json.dumps(["Hello from the gateway's loop."]))
    (home / "config.toml").write_text(
        f'backend = "fake"\nworkspace = "{ws}"\n\n'
        f'[backends.fake]\nscript = "{script}"\n\n'
        f'[connectors.web]\nenabled = true\nport = {port}\ntoken_env = "PAGE_TOKEN"\n'
    )
    env = {
        **os.environ,
        "CLAWLOOP_CONFIG": str(home / "config.toml"),
        "CLAWLOOP_DATA_DIR": str(home / "data"),
        "PAGE_TOKEN": TOKEN,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "cli.main", "gateway"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def page(client: httpx.Client, proc: subprocess.Popen[str]) -> str:
    """The chat page, once the gateway listens (polled: the process takes a moment)."""
    deadline = time.monotonic() + STARTUP_S
    while True:
        try:
            return client.get("/").raise_for_status().text
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"no page from the gateway: {proc.communicate()[1]}") from None
            time.sleep(0.1)


def test_the_gateway_serves_the_page_and_runs_its_turn_on_the_gateways_loop(
    isolated_home: Path, ws: Path
) -> None:
    port = free_port()
    proc = start_gateway(isolated_home, ws, port)
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=url, timeout=30, headers={"x-clawloop-token": TOKEN}) as c:
            html = page(c, proc)
            session = re.search(r'data-session="([^"]+)"', html)
            csrf = re.search(r'data-csrf="([^"]+)"', html)
            assert session and csrf
            headers = {"x-clawloop-session": session[1], "x-csrf-token": csrf[1]}
            with c.stream("POST", "/chat/send", json={"message": "hi"}, headers=headers) as r:
                assert r.status_code == 200
                assert r.headers["content-type"].startswith("text/event-stream")
                events = [
                    json.loads(line.removeprefix("data: "))
                    for line in r.iter_lines()
                    if line.startswith("data: ")
                ]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    tokens = "".join(e["text"] for e in events if e["type"] == "token")
    finals = [e["content"] for e in events if e["type"] == "final"]
    assert finals == ["Hello from the gateway's loop."] and "gateway" in tokens
    assert events[-1] == {"type": "done"}
    assert proc.returncode == 0, err
    assert "web_page" in err  # the gateway's log names the page's address
    saved = isolated_home / "data" / "sessions" / f"{session[1]}.jsonl"
    assert saved.exists() and "Hello from the gateway" in saved.read_text()


def test_the_page_inside_the_gateway_refuses_requests_without_the_token(
    isolated_home: Path, ws: Path
) -> None:
    port = free_port()
    proc = start_gateway(isolated_home, ws, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            deadline = time.monotonic() + STARTUP_S
            while True:
                try:
                    r = client.get("/")
                    break
                except httpx.TransportError:
                    assert proc.poll() is None and time.monotonic() < deadline
                    time.sleep(0.1)
            assert r.status_code == 403 and "token is required" in r.text
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def test_the_page_shares_the_gateways_always_rules_both_ways(home: Path, workspace: Path) -> None:
    """The page as the gateway builds it, around a loop and the gateway's list of rules."""
    settings = load_settings({"workspace": workspace, "backend": "fake"})
    model = fake_backend()
    loop = build_loop(settings, model, settings_toolbox(settings, None, None, model))
    shared: list[str] = []  # the gateway's `always` list
    port = free_port()
    server, thread = serve(page_app(settings, loop, "127.0.0.1", port, None, shared), port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            headers = page_tokens(client)
            events = turn(client, headers, "run: echo shared-$((6*7))", answer="always")
            assert any(e["type"] == "approval" for e in events)
            assert shared == ["shell(echo shared-$((6*7)))"]  # the chats start with it now
            # A rule said "always" to in a chat: the page's next turn is not asked.
            shared.append("shell(echo from-a-chat)")
            events = turn(client, page_tokens(client), "run: echo from-a-chat")
            assert not any(e["type"] == "approval" for e in events)
            assert any(e["type"] == "tool_result" and e["ok"] for e in events)
    finally:
        stop(server, thread)


def turn(
    client: httpx.Client, headers: dict[str, str], text: str, answer: str = ""
) -> list[dict[str, Any]]:
    """One turn's events; each ask is answered with ``answer`` as it comes."""
    events = []
    with client.stream("POST", "/chat/send", json={"message": text}, headers=headers) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line.removeprefix("data: "))
            events.append(event)
            if event["type"] == "approval":
                body = {"id": event["id"], "answer": answer}
                assert client.post("/chat/approve", json=body, headers=headers).status_code == 200
    return events
