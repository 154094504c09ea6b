"""The gateway with the real python-telegram-bot client against a local Bot API server."""

from __future__ import annotations

from pathlib import Path

from fake_telegram import TOKEN, FakeTelegram
from harness import Setup, make_gateway
from loopthread import LoopThread, wait_for

from connectors.access import AccessList
from connectors.state import GatewayState
from connectors.telegram_bot import TelegramConnector

OWNER = 111
FRIEND = 222
STRANGER = 333


def start(lt: LoopThread, fake: FakeTelegram, tmp_path: Path, ws: Path, **options: object) -> Setup:
    state = GatewayState(tmp_path / "state.json")
    connector = TelegramConnector(TOKEN, state, fake.base_url, poll_timeout=1)
    setup = make_gateway([connector], tmp_path, ws, {"telegram": [str(OWNER)]}, state, **options)
    lt.run(setup.gateway.start())
    return setup


def texts(fake: FakeTelegram, chat: int) -> list[str]:
    return [s.text for s in fake.replies(chat)]


def test_a_tool_runs_in_the_sandbox_and_the_reply_is_threaded(
    lt: LoopThread, fake: FakeTelegram, tmp_path: Path, ws: Path
) -> None:
    setup = start(lt, fake, tmp_path, ws)
    asked = fake.say(OWNER, OWNER, "run: echo $((6*7)) from $(id -u)")
    ask = wait_for(
        lambda: next((s for s in fake.replies(OWNER) if "Approval needed" in s.text), None),
        what="the ask",
    )
    fake.say(OWNER, OWNER, "/approve " + ask.text.split("/approve ")[1].split(" ")[0])
    wait_for(lambda: any(t.startswith("done:") for t in texts(fake, OWNER)), what="answer")
    [answer] = [s for s in fake.replies(OWNER) if s.text.startswith("done:")]
    assert "42 from 65534" in answer.text and answer.reply_to == asked
    progress = [s for s in fake.replies(OWNER) if s.text.startswith(("⚙", "✓"))]
    assert [s.text for s in fake.replies(OWNER)].count(answer.text) == 1
    assert len(progress) == 1 and progress[0].reply_to == asked  # one message, edited in place
    assert any(e[1] == progress[0].message_id and e[2].startswith("✓ shell") for e in fake.edits)
    assert (OWNER, "typing") in fake.actions
    lt.run(setup.gateway.stop())


def test_strangers_get_a_code_and_never_reach_the_model_until_paired(
    lt: LoopThread, fake: FakeTelegram, tmp_path: Path, ws: Path
) -> None:
    setup = start(lt, fake, tmp_path, ws)
    fake.say(STRANGER, STRANGER, "run: touch pwned")
    fake.say(STRANGER, STRANGER, "/approve abcdef")
    wait_for(lambda: len(fake.replies(STRANGER)) >= 2, what="refusals")
    first, second = texts(fake, STRANGER)
    assert "pairing code is" in first and "pairing code is" in second
    code = first.split("pairing code is ")[1].split(":")[0]
    assert len(code) == 6 and f"agent pairing approve {code}" in first
    assert setup.backend.requests == [] and not (ws / "pwned").exists()
    # The owner approves on their machine (another process, the same file).
    access = AccessList(tmp_path / "pairing.json", {}, {})
    assert [p.code for p in access.pending()] == [code]
    assert access.approve(code) == f"telegram:{STRANGER}"
    fake.say(STRANGER, STRANGER, "hello now")
    wait_for(lambda: "echo: hello now" in texts(fake, STRANGER), what="paired answer")
    assert len(setup.backend.requests) == 1
    access.revoke(f"telegram:{STRANGER}")
    fake.say(STRANGER, STRANGER, "still there?")
    wait_for(lambda: len(fake.replies(STRANGER)) >= 4, what="refusal after revoke")
    assert "pairing code is" in texts(fake, STRANGER)[-1] and len(setup.backend.requests) == 1
    lt.run(setup.gateway.stop())


def test_in_groups_only_mentions_and_replies_count(
    lt: LoopThread, fake: FakeTelegram, tmp_path: Path, ws: Path
) -> None:
    setup = start(lt, fake, tmp_path, ws)
    group = -100500
    fake.say(group, OWNER, "just chatting among ourselves", group=True)
    fake.say(group, STRANGER, "a stranger chatting", group=True)
    fake.say(group, OWNER, "@clawbot what time is it", group=True)
    fake.say(group, OWNER, "and you?", group=True, reply_to_bot=True)
    wait_for(lambda: len(fake.replies(group)) >= 2, what="group answers")
    lt.run(setup.gateway.stop())
    assert texts(fake, group) == ["echo: what time is it", "echo: and you?"]
    assert len(setup.backend.requests) == 2


def test_approve_by_the_owner_and_refusal_for_anyone_else(
    lt: LoopThread, fake: FakeTelegram, tmp_path: Path, ws: Path
) -> None:
    setup = start(lt, fake, tmp_path, ws, rate_burst=50)
    access = AccessList(tmp_path / "pairing.json", {}, {})
    access.approve(access.code_for(f"telegram:{FRIEND}", "friend"))
    group = -100600
    fake.say(group, OWNER, "@clawbot run: touch approved.txt", group=True)
    ask = wait_for(
        lambda: next((s for s in fake.replies(group) if "Approval needed" in s.text), None),
        what="the ask",
    )
    ask_id = ask.text.split("/approve ")[1].split(" ")[0]
    assert ask.buttons == [f"/approve {ask_id}", f"/approve {ask_id} always", f"/deny {ask_id}"]
    assert "touch approved.txt" in ask.text and "10 min" in ask.text
    fake.say(group, FRIEND, f"/approve@clawbot {ask_id}", group=True)
    fake.press(group, STRANGER, f"/approve {ask_id}", ask.message_id)
    wait_for(lambda: any("Only the owner" in t for t in texts(fake, group)), what="refusal")
    assert not (ws / "approved.txt").exists()
    fake.press(group, OWNER, f"/approve {ask_id}", ask.message_id)
    wait_for(lambda: any(t.startswith("done:") for t in texts(fake, group)), what="answer")
    assert (ws / "approved.txt").exists()
    assert any(e[1] == ask.message_id and "approved" in e[2] for e in fake.edits)
    stranger_saw = [t for t in texts(fake, group) if "pairing code" in t]
    assert len(stranger_saw) == 1  # the stranger's button press got a code, nothing else
    lt.run(setup.gateway.stop())


def test_an_unanswered_ask_expires_and_the_model_is_told(
    lt: LoopThread, fake: FakeTelegram, tmp_path: Path, ws: Path
) -> None:
    setup = start(lt, fake, tmp_path, ws, ask_timeout_s=1.0)
    fake.say(OWNER, OWNER, "run: touch late.txt")
    wait_for(lambda: any(t.startswith("done:") for t in texts(fake, OWNER)), what="answer")
    [done] = [t for t in texts(fake, OWNER) if t.startswith("done:")]
    assert "nobody answered" in done and not (ws / "late.txt").exists()
    assert any("expired" in e[2] for e in fake.edits)
    lt.run(setup.gateway.stop())


def test_long_replies_split_and_text_only_and_not_modified(
    lt: LoopThread, fake: FakeTelegram, tmp_path: Path, ws: Path
) -> None:
    setup = start(lt, fake, tmp_path, ws)
    big = "x" * 100_000
    first = fake.say(OWNER, OWNER, big)
    wait_for(lambda: sum(len(t) for t in texts(fake, OWNER)) >= 100_000, what="long answer")
    chunks = fake.replies(OWNER)
    assert all(len(c.text) <= 4096 for c in chunks) and len(chunks) >= 25
    assert chunks[0].reply_to == first and all(c.reply_to is None for c in chunks[1:])
    assert "".join(c.text for c in chunks) == "echo: " + big
    fake.say(OWNER, OWNER, None, photo=True)
    wait_for(lambda: "text only for now" in texts(fake, OWNER)[-1], what="text only")
    # Two identical progress lines in a row: Telegram's "not modified" must not break the turn.
    fake.say(OWNER, OWNER, "run: echo same")
    wait_for(lambda: texts(fake, OWNER)[-1].startswith("done:"), what="answer")
    lt.run(setup.gateway.stop())
