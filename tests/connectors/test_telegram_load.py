"""The Telegram connector under load and trouble: 50 chats at once, a flood, a dropped server."""

from __future__ import annotations

import time
from pathlib import Path

from fake_telegram import TOKEN, FakeTelegram
from harness import make_gateway
from loopthread import LoopThread, wait_for

from connectors.state import GatewayState
from connectors.telegram_bot import TelegramConnector


def connect(fake: FakeTelegram, tmp_path: Path) -> tuple[TelegramConnector, GatewayState]:
    state = GatewayState(tmp_path / "state.json")
    return TelegramConnector(TOKEN, state, fake.base_url, poll_timeout=1, max_backoff_s=1), state


def test_fifty_chats_at_once_each_get_their_own_answers(
    lt: LoopThread, fake: FakeTelegram, tmp_path: Path, ws: Path
) -> None:
    chats = list(range(5001, 5051))
    connector, state = connect(fake, tmp_path)
    setup = make_gateway([connector], tmp_path, ws, {"telegram": [str(c) for c in chats]}, state)
    lt.run(setup.gateway.start())
    for chat in chats:  # every chat runs a sandboxed command, then writes again
        fake.say(chat, chat, f"run: echo chat-{chat}")
        fake.say(chat, chat, f"second from {chat}")
    began = time.monotonic()
    wait_for(lambda: all(len(fake.replies(c)) >= 3 for c in chats), 120, "every chat's answers")
    took = time.monotonic() - began
    lt.run(setup.gateway.stop())
    for chat in chats:
        answers = [s.text for s in fake.replies(chat) if not s.text.startswith(("⚙", "✓"))]
        assert answers[0].startswith("done: exit code: 0") and f"chat-{chat}" in answers[0]
        assert answers[1] == f"echo: second from {chat}"  # in order, within the chat
        others = [c for c in chats if c != chat]
        assert not any(f"chat-{o}" in t or f"from {o}" in t for o in others for t in answers)
    print(f"50 chats, 100 turns, 50 sandboxed commands: {took:.1f} s")


def test_a_flood_from_one_sender_does_not_starve_another(
    lt: LoopThread, fake: FakeTelegram, tmp_path: Path, ws: Path
) -> None:
    connector, state = connect(fake, tmp_path)
    setup = make_gateway(
        [connector], tmp_path, ws, {"telegram": ["7", "8"]}, state, rate_burst=3,
        rate_per_minute=6,
    )  # fmt: skip
    lt.run(setup.gateway.start())
    for i in range(30):
        fake.say(7, 7, f"flood {i}")
    fake.say(8, 8, "just one")
    wait_for(lambda: "echo: just one" in [s.text for s in fake.replies(8)], 30, "the quiet one")
    wait_for(lambda: any("too fast" in s.text for s in fake.replies(7)), 30, "the warning")
    time.sleep(1)
    lt.run(setup.gateway.stop())
    flood = [s.text for s in fake.replies(7)]
    assert [t for t in flood if t.startswith("echo:")] == [f"echo: flood {i}" for i in range(3)]
    assert sum("too fast" in t for t in flood) == 1


def test_reconnects_after_the_server_drops_and_after_5xx(
    lt: LoopThread, fake: FakeTelegram, tmp_path: Path, ws: Path
) -> None:
    connector, state = connect(fake, tmp_path)
    setup = make_gateway([connector], tmp_path, ws, {"telegram": ["9"]}, state)
    lt.run(setup.gateway.start())
    fake.say(9, 9, "before")
    wait_for(lambda: [s.text for s in fake.replies(9)] == ["echo: before"], 30, "first answer")
    lt.run(fake.stop())
    fake.say(9, 9, "while it was down")
    time.sleep(2.5)  # polls fail meanwhile: connection refused
    lt.run(fake.start())
    with fake.lock:
        fake.fail_next += [502, 503]
    wait_for(lambda: len(fake.replies(9)) >= 2, 30, "the answer after the outage")
    lt.run(setup.gateway.stop())
    assert [s.text for s in fake.replies(9)] == ["echo: before", "echo: while it was down"]
