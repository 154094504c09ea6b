"""The web page inside `agent gateway`: a real gateway process with ``[connectors.web]``
enabled (and no chat bot), its page reached over HTTP on 127.0.0.1, its turn run by the
gateway's loop on the scripted fake backend."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.web_ui.conftest import free_port

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
