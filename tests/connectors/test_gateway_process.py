"""`agent gateway` as its users run it: a real process, killed, stopped and restarted.

The local Bot API server runs in the test; the gateway is a child process with its config file,
a scripted fake model and the real sandbox.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from fake_telegram import TOKEN, FakeTelegram
from loopthread import wait_for

OWNER = 111


def configure(home: Path, ws: Path, fake: FakeTelegram, turns: list[object]) -> dict[str, str]:
    script = home / "script.json"
    script.write_text(json.dumps(turns))
    (home / "config.toml").write_text(
        f'backend = "fake"\nworkspace = "{ws}"\n\n'
        f'[backends.fake]\nscript = "{script}"\n\n'
        '[sandbox]\nallow = ["shell(sleep *)"]\n\n'
        f'[connectors.telegram]\nenabled = true\nbase_url = "{fake.base_url}"\n'
        f"owner_ids = [{OWNER}]\npoll_timeout = 1\n"
    )
    env = dict(os.environ)
    env.update(
        CLAWLOOP_CONFIG=str(home / "config.toml"),
        CLAWLOOP_DATA_DIR=str(home / "data"),
        CLAWLOOP_TELEGRAM_TOKEN=TOKEN,
    )
    return env


def gateway(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cli.main", "gateway", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )


def slow_tool(seconds: int) -> dict[str, object]:
    return {"tool_calls": [{"name": "shell", "arguments": {"command": f"sleep {seconds}"}}]}


def texts(fake: FakeTelegram) -> list[str]:
    return [s.text for s in fake.replies(OWNER)]


def test_check_validates_the_token(fake: FakeTelegram, isolated_home: Path, ws: Path) -> None:
    env = configure(isolated_home, ws, fake, [])
    ok = gateway(env, "--check")
    out, err = ok.communicate(timeout=60)
    assert ok.returncode == 0, err
    assert "telegram: ok (@clawbot)" in out
    bad = gateway({**env, "CLAWLOOP_TELEGRAM_TOKEN": "999:wrong-token-xyz"}, "--check")
    out, err = bad.communicate(timeout=60)
    assert bad.returncode == 2 and "Telegram refused the bot token" in err
    assert "wrong-token-xyz" not in out + err


def test_kill_9_mid_turn_then_restart_answers_exactly_once(
    fake: FakeTelegram, isolated_home: Path, ws: Path
) -> None:
    env = configure(isolated_home, ws, fake, [slow_tool(30), "finished", "second answer"])
    first = gateway(env)
    try:
        asked = fake.say(OWNER, OWNER, "do the slow thing")
        wait_for(lambda: any(t.startswith("⚙ shell") for t in texts(fake)), 60, "the tool")
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        first.kill()
    state = json.loads((isolated_home / "data" / "gateway" / "state.json").read_text())
    assert list(state["inflight"]) == [f"telegram:{OWNER}:{asked}"]
    # The restarted gateway runs the script from its start: the tool, then "finished".
    env = configure(isolated_home, ws, fake, [slow_tool(1), "finished", "second answer"])
    second = gateway(env)
    try:
        wait_for(lambda: "finished" in texts(fake), 60, "the resumed answer")
        later = fake.say(OWNER, OWNER, "and now?")
        wait_for(lambda: "second answer" in texts(fake), 60, "the next answer")
        time.sleep(2)  # room for a duplicate to show up
        second.send_signal(signal.SIGTERM)
        _, err = second.communicate(timeout=20)
    finally:
        second.kill()
    assert texts(fake).count("finished") == 1 and texts(fake).count("second answer") == 1
    [done] = [s for s in fake.replies(OWNER) if s.text == "finished"]
    [next_one] = [s for s in fake.replies(OWNER) if s.text == "second answer"]
    assert done.reply_to == asked and next_one.reply_to == later
    assert second.returncode == 0
    for line in err.splitlines():
        assert "event" in json.loads(line)  # structured, one JSON object a line
    assert TOKEN not in err


def test_sigterm_stops_within_15_s_with_exit_0_and_keeps_the_turn(
    fake: FakeTelegram, isolated_home: Path, ws: Path
) -> None:
    env = configure(isolated_home, ws, fake, [slow_tool(60), "finished"])
    proc = gateway(env)
    try:
        asked = fake.say(OWNER, OWNER, "long job")
        wait_for(lambda: any(t.startswith("⚙ shell") for t in texts(fake)), 60, "the tool")
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
        took = time.monotonic() - began
    finally:
        proc.kill()
    assert proc.returncode == 0 and took < 15, took
    assert "finished" not in texts(fake) and not any("stopped" in t for t in texts(fake))
    state = json.loads((isolated_home / "data" / "gateway" / "state.json").read_text())
    assert list(state["inflight"]) == [f"telegram:{OWNER}:{asked}"]
    assert state["cursors"]["telegram"] == fake.next_update
