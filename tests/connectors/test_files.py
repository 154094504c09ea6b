"""Files sent to the bot: saved into the workspace's inbox for the owner when allowed, else not.

The real client libraries fetch them from the fake servers as from the platforms: Telegram's
``getFile`` and its file URL, Discord's attachment URL.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_discord import TOKEN as DISCORD_TOKEN
from fake_discord import FakeDiscord
from fake_telegram import TOKEN, FakeTelegram
from harness import Setup, make_gateway
from loopthread import LoopThread, wait_for

from connectors.access import AccessList
from connectors.discord_bot import DiscordConnector
from connectors.inbox import save_file
from connectors.state import GatewayState
from connectors.telegram_bot import TelegramConnector

OWNER = 111
FRIEND = 222


def start(lt: LoopThread, fake: FakeTelegram, tmp_path: Path, ws: Path, **options: object) -> Setup:
    state = GatewayState(tmp_path / "state.json")
    connector = TelegramConnector(TOKEN, state, fake.base_url, poll_timeout=1)
    setup = make_gateway(
        [connector], tmp_path, ws, {"telegram": [str(OWNER)]}, state, rate_burst=50, **options
    )
    lt.run(setup.gateway.start())
    return setup


def texts(fake: FakeTelegram, chat: int) -> list[str]:
    return [s.text for s in fake.replies(chat)]


def test_owner_files_are_saved_safely_and_the_turn_is_told(
    lt: LoopThread, fake: FakeTelegram, tmp_path: Path, ws: Path
) -> None:
    setup = start(lt, fake, tmp_path, ws, accept_files=True, max_file_bytes=1000, workspace=ws)
    AccessList(tmp_path / "pairing.json", {}, {}).approve(
        AccessList(tmp_path / "pairing.json", {}, {}).code_for(f"telegram:{FRIEND}", "friend")
    )
    fake.say(OWNER, OWNER, "what is in it?", document=("../../notes v1.txt", b"first"))
    wait_for(lambda: any("inbox/notes_v1.txt" in t for t in texts(fake, OWNER)), what="saved")
    [answer] = texts(fake, OWNER)
    assert answer.startswith("echo: what is in it?\n\n[The user sent a file")
    assert (ws / "inbox" / "notes_v1.txt").read_bytes() == b"first"
    assert not (tmp_path / "notes v1.txt").exists() and not (ws.parent / "notes v1.txt").exists()
    # The same name again: a new file beside it, the first one untouched. No caption: fine too.
    fake.say(OWNER, OWNER, None, document=("notes v1.txt", b"second"))
    wait_for(lambda: any("inbox/notes_v1-1.txt" in t for t in texts(fake, OWNER)), what="again")
    assert (ws / "inbox" / "notes_v1.txt").read_bytes() == b"first"
    assert (ws / "inbox" / "notes_v1-1.txt").read_bytes() == b"second"
    assert len(fake.downloads) == 2 and all(p.startswith("documents/") for p in fake.downloads)
    # Over the size limit: refused before any download, and the owner is told.
    fake.say(OWNER, OWNER, None, document=("big.bin", b"x" * 10), declared_size=5000)
    wait_for(lambda: any("too big" in t for t in texts(fake, OWNER)), what="too big")
    assert len(fake.downloads) == 2 and not (ws / "inbox" / "big.bin").exists()
    # A message that understates the size: getFile's own size is checked before the download.
    fake.say(OWNER, OWNER, None, document=("liar.bin", b"y" * 2000), declared_size=10)
    wait_for(lambda: sum("too big" in t for t in texts(fake, OWNER)) == 2, what="liar")
    assert not (ws / "inbox" / "liar.bin").exists()
    # Someone paired but not an owner: never downloaded, never saved.
    fake.say(FRIEND, FRIEND, None, document=("friend.txt", b"hi"))
    wait_for(lambda: "text only for now" in " ".join(texts(fake, FRIEND)), what="text only")
    fake.say(FRIEND, FRIEND, "and this", document=("friend2.txt", b"hi"))
    wait_for(lambda: "echo: and this" in texts(fake, FRIEND), what="the caption alone")
    assert len(fake.downloads) == 2 and sorted(os.listdir(ws / "inbox")) == [
        "notes_v1-1.txt",
        "notes_v1.txt",
    ]
    lt.run(setup.gateway.stop())
    assert setup.backend.requests[-1].messages[-1].content == "and this"


def test_files_are_refused_politely_by_default(
    lt: LoopThread, fake: FakeTelegram, tmp_path: Path, ws: Path
) -> None:
    setup = start(lt, fake, tmp_path, ws, workspace=ws)
    fake.say(OWNER, OWNER, None, document=("a.txt", b"data"))
    wait_for(lambda: texts(fake, OWNER), what="the reply")
    lt.run(setup.gateway.stop())
    assert texts(fake, OWNER) == ["Sorry, I handle text only for now."]
    assert fake.downloads == [] and not (ws / "inbox").exists()
    assert setup.backend.requests == []


def test_the_inbox_is_never_a_link_and_names_stay_inside(tmp_path: Path) -> None:
    ws, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    ws.mkdir()
    elsewhere.mkdir()
    assert save_file(ws, "..", b"a") == Path("inbox/file")
    assert save_file(ws, ".bashrc", b"b") == Path("inbox/bashrc")
    assert save_file(ws, "C:\\Users\\x\\-rf.sh", b"c") == Path("inbox/rf.sh")
    (ws / "inbox" / "taken.txt").symlink_to(elsewhere / "target.txt")
    assert save_file(ws, "taken.txt", b"d") == Path("inbox/taken-1.txt")  # the link is kept
    assert not (elsewhere / "target.txt").exists()
    (ws / "inbox").rename(ws / "old")
    (ws / "inbox").symlink_to(elsewhere)
    with pytest.raises(OSError):
        save_file(ws, "x.txt", b"e")
    assert os.listdir(elsewhere) == []


@pytest.fixture
def discord_fake(lt: LoopThread) -> Iterator[FakeDiscord]:
    server = FakeDiscord()
    lt.run(server.start())
    yield server
    lt.run(server.stop())


def test_a_discord_attachment_is_saved_for_the_owner(
    lt: LoopThread, discord_fake: FakeDiscord, tmp_path: Path, ws: Path
) -> None:
    fake = discord_fake
    owner, dm = 800000000000000001, 600000000000000001
    state = GatewayState(tmp_path / "state.json")
    connector = DiscordConnector(
        DISCORD_TOKEN, state, fake.api_base, fake.gateway_url, guild_ready_timeout=0.1
    )
    setup = make_gateway(
        [connector], tmp_path, ws, {"discord": [str(owner)]}, state,
        accept_files=True, workspace=ws,
    )  # fmt: skip
    lt.run(setup.gateway.start())
    fake.say(dm, owner, "", files=[("report (final).csv", b"a,b\n1,2\n")])
    wait_for(lambda: [p for p in fake.replies(dm) if "inbox/" in p.text], what="the saved note")
    [reply] = [p.text for p in fake.replies(dm)]
    assert "inbox/report_final_.csv" in reply
    assert (ws / "inbox" / "report_final_.csv").read_bytes() == b"a,b\n1,2\n"
    assert len(fake.downloads) == 1
    lt.run(setup.gateway.stop())
