"""The gateway with the real discord.py client against a local REST API and gateway websocket."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_discord import BOT_ID, MESSAGE_CONTENT, TOKEN, FakeDiscord, Posted
from harness import Setup, make_gateway
from loopthread import LoopThread, wait_for

from connectors.discord_bot import DiscordConnector
from connectors.state import GatewayState

OWNER = 800000000000000001
STRANGER = 800000000000000002
DM = 600000000000000001
CHANNEL = 600000000000000002


@pytest.fixture
def fake(lt: LoopThread) -> Iterator[FakeDiscord]:
    server = FakeDiscord()
    lt.run(server.start())
    yield server
    lt.run(server.stop())


def start(lt: LoopThread, fake: FakeDiscord, tmp_path: Path, ws: Path) -> Setup:
    state = GatewayState(tmp_path / "state.json")
    connector = DiscordConnector(
        TOKEN, state, fake.api_base, fake.gateway_url, guild_ready_timeout=0.1
    )
    setup = make_gateway([connector], tmp_path, ws, {"discord": [str(OWNER)]}, state)
    lt.run(setup.gateway.start())
    return setup


def texts(fake: FakeDiscord, channel: int) -> list[str]:
    return [p.text for p in fake.replies(channel)]


def test_a_dm_runs_a_tool_and_the_answer_is_split_and_threaded(
    lt: LoopThread, fake: FakeDiscord, tmp_path: Path, ws: Path
) -> None:
    setup = start(lt, fake, tmp_path, ws)
    assert fake.identifies[0]["intents"] & MESSAGE_CONTENT
    asked = fake.say(DM, OWNER, "run: printf %s " + "y" * 4500)
    ask = wait_for(
        lambda: next((p for p in fake.replies(DM) if "Approval needed" in p.text), None),
        what="the ask",
    )
    ask_id = ask.text.split("/approve ")[1].split(" ")[0]
    assert ask.buttons == [f"/approve {ask_id}", f"/approve {ask_id} always", f"/deny {ask_id}"]
    fake.say(DM, STRANGER, f"/approve {ask_id}")
    wait_for(lambda: any("pairing code" in t for t in texts(fake, DM)), what="refusal")
    fake.say(DM, OWNER, f"/approve {ask_id}")

    def after_done() -> list[str]:
        got = texts(fake, DM)
        starts = [i for i, t in enumerate(got) if t.startswith("done:")]
        return got[starts[0] :] if starts else []

    wait_for(lambda: "".join(after_done()).count("y") >= 4500, what="the answer's chunks")
    replies = fake.replies(DM)
    answer = replies[next(i for i, p in enumerate(replies) if p.text.startswith("done:")) :]
    assert all(len(p.text) <= 2000 for p in fake.replies(DM))
    assert answer[0].text.startswith("done: exit code: 0") and answer[0].reply_to == asked
    assert "".join(p.text for p in answer).count("y") == 4500
    assert DM in fake.typing and any(e[2].startswith("✓ shell") for e in fake.edits)
    lt.run(setup.gateway.stop())


def test_in_a_guild_channel_only_mentions_count(
    lt: LoopThread, fake: FakeDiscord, tmp_path: Path, ws: Path
) -> None:
    setup = start(lt, fake, tmp_path, ws)
    fake.say(CHANNEL, OWNER, "talking to someone else", guild=True)
    fake.say(CHANNEL, STRANGER, "me too", guild=True)
    fake.say(CHANNEL, OWNER, "hello bot", guild=True, mention=True)
    wait_for(lambda: texts(fake, CHANNEL), what="the answer")
    time.sleep(0.5)
    lt.run(setup.gateway.stop())
    assert texts(fake, CHANNEL) == ["echo: hello bot"]
    assert len(setup.backend.requests) == 1 and f"<@{BOT_ID}>" not in texts(fake, CHANNEL)[0]


def test_reconnects_after_the_gateway_drops_and_catches_up_after_a_restart(
    lt: LoopThread, fake: FakeDiscord, tmp_path: Path, ws: Path
) -> None:
    setup = start(lt, fake, tmp_path, ws)
    fake.say(DM, OWNER, "one")
    wait_for(lambda: texts(fake, DM) == ["echo: one"], what="first answer")
    lt.run(fake.drop())
    wait_for(lambda: fake.resumes >= 1 and fake.sockets, 30, "the resumed connection")
    fake.say(DM, OWNER, "two")
    wait_for(lambda: texts(fake, DM) == ["echo: one", "echo: two"], 30, "answer after drop")
    lt.run(setup.gateway.stop())
    fake.say(DM, OWNER, "three, while the bot was down", live=False)
    again = start(lt, fake, tmp_path, ws)
    wait_for(lambda: len(texts(fake, DM)) >= 3, 30, "the missed message")
    time.sleep(1)
    lt.run(again.gateway.stop())
    assert texts(fake, DM) == ["echo: one", "echo: two", "echo: three, while the bot was down"]


def test_button_clicks_answer_asks_and_the_bot_acknowledges_each_interaction(
    lt: LoopThread, fake: FakeDiscord, tmp_path: Path, ws: Path
) -> None:
    setup = start(lt, fake, tmp_path, ws)

    def ask_in(channel: int, after: int = 0) -> Posted:
        return wait_for(
            lambda: next(
                (p for p in fake.replies(channel)[after:] if "Approval needed" in p.text), None
            ),
            what="the ask",
        )

    fake.say(DM, OWNER, "run: touch clicked.txt")
    ask = ask_in(DM)
    ask_id = ask.text.split("/approve ")[1].split(" ")[0]
    # A stranger's click: acknowledged, answered with a pairing code, approves nothing.
    stranger_click = fake.press(DM, STRANGER, f"/approve {ask_id}", ask.message_id)
    wait_for(lambda: any("pairing code" in t for t in texts(fake, DM)), what="the refusal")
    owner_click = fake.press(DM, OWNER, f"/approve {ask_id}", ask.message_id)
    wait_for(lambda: any(t.startswith("done:") for t in texts(fake, DM)), what="the answer")
    assert (ws / "clicked.txt").exists()
    acknowledged = {iid: kind for iid, _, kind in fake.callbacks}
    assert acknowledged == {stranger_click: 6, owner_click: 6}  # deferred message updates
    assert all(token == f"itoken-{iid}" for iid, token, _ in fake.callbacks)
    # The ask is edited to its outcome and its buttons are gone: a second click has no target.
    edits = zip(fake.edits, fake.edit_bodies, strict=True)
    [closing] = [body for (_, m, _), body in edits if m == ask.message_id]
    assert "approved" in closing["content"] and closing.get("components") == []
    # In a guild channel the click comes with a member; "Always" goes through the same path.
    fake.say(CHANNEL, OWNER, "run: touch guild.txt", guild=True, mention=True)
    guild_ask = ask_in(CHANNEL)
    always = [b for b in guild_ask.buttons if b.endswith(" always")]
    assert always and guild_ask.buttons[1] == always[0]
    fake.press(CHANNEL, OWNER, always[0], guild_ask.message_id, guild=True)
    wait_for(lambda: any(t.startswith("done:") for t in texts(fake, CHANNEL)), what="answer")
    assert (ws / "guild.txt").exists() and len(setup.gateway.always) == 1
    assert any(m == guild_ask.message_id and "(always)" in t for _, m, t in fake.edits)
    lt.run(setup.gateway.stop())


def test_a_dispatch_the_client_cannot_parse_does_not_leave_the_bot_deaf(
    lt: LoopThread, fake: FakeDiscord, tmp_path: Path, ws: Path
) -> None:
    setup = start(lt, fake, tmp_path, ws)
    # discord.py's connect() ends on a payload it cannot read; the connector connects again.
    fake.press(DM, OWNER, "/status", 1, omit=("attachment_size_limit",))
    wait_for(lambda: len(fake.identifies) >= 2 and fake.sockets, 15, "the new connection")
    fake.say(DM, OWNER, "still there?")
    wait_for(lambda: "echo: still there?" in texts(fake, DM), what="the answer")
    lt.run(setup.gateway.stop())
