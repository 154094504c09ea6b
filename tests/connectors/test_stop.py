"""``/stop`` in a chat ends a command already running in the sandbox, not just pending asks."""

from __future__ import annotations

import random
import time
from pathlib import Path

from fake_telegram import TOKEN, FakeTelegram
from harness import make_gateway, processes_with
from loopthread import LoopThread, wait_for

from connectors.state import GatewayState
from connectors.telegram_bot import TelegramConnector

OWNER = 111


def texts(fake: FakeTelegram) -> list[str]:
    return [s.text for s in fake.replies(OWNER)]


def test_stop_kills_the_running_command_and_the_chat_is_told(
    lt: LoopThread, fake: FakeTelegram, tmp_path: Path, ws: Path
) -> None:
    state = GatewayState(tmp_path / "state.json")
    connector = TelegramConnector(TOKEN, state, fake.base_url, poll_timeout=1)
    setup = make_gateway(
        [connector], tmp_path, ws, {"telegram": [str(OWNER)]}, state,
        allow_rules=["shell(sleep *)"],
    )  # fmt: skip
    lt.run(setup.gateway.start())
    marker = f"sleep {60 + random.randint(1000, 9999) / 10000:.4f}"
    fake.say(OWNER, OWNER, f"run: {marker}")
    wait_for(lambda: len(processes_with(marker)) >= 3, what="the command running in bwrap")
    assert not any("Approval needed" in t for t in texts(fake))  # the allow rule let it run
    fake.say(OWNER, OWNER, "/stop")
    began = time.monotonic()
    wait_for(lambda: not processes_with(marker), 5, what="every process of the command gone")
    gone_after = time.monotonic() - began
    wait_for(lambda: "⏹ stopped." in texts(fake), what="the stopped reply")
    # From the poll that delivers /stop to the last process: well under two seconds.
    assert gone_after < 2.0, gone_after
    progress = [e[2] for e in fake.edits if e[2].startswith("✗ shell")]
    assert progress, fake.edits  # the tool call is marked failed in the progress message
    lt.run(setup.gateway.stop())
    session = (tmp_path / "sessions" / "telegram-111.jsonl").read_text()
    assert "shell was stopped by the user" in session
