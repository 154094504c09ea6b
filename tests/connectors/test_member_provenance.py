"""A chat member who is not an owner talks to the agent, but their words are not the owner's.

The real gateway and python-telegram-bot against the local Bot API server, a scripted model,
the real skills and data-flow gate. An allowed member asks for ``notes.md`` to be overwritten;
the member's message is labelled ``member`` in the session (and after a reload), so the path
counts as untrusted text: only an owner could approve the call, and with no owner in the
member's private chat it is refused at once.
The same message from the owner is the owner's own words, and the file is written.
"""

from __future__ import annotations

from pathlib import Path

from fake_telegram import TOKEN, FakeTelegram
from harness import make_gateway
from loopthread import LoopThread, wait_for

from agent.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from agent.provenance import Provenance
from agent.session import Session
from backends.fake import FakeBackend
from connectors.state import GatewayState
from connectors.telegram_bot import TelegramConnector

OWNER, MEMBER = 111, 222
ASK = "please write 'moved' to notes.md"


def _run(lt: LoopThread, fake: FakeTelegram, tmp_path: Path, ws: Path, who: int) -> Session:
    write = AssistantMessage(
        tool_calls=[ToolCall.make("files_write", {"path": "notes.md", "content": "moved"})]
    )
    backend = FakeBackend([write, AssistantMessage(content="finished")])
    state = GatewayState(tmp_path / "state.json")
    connector = TelegramConnector(TOKEN, state, fake.base_url, poll_timeout=1)
    setup = make_gateway(
        [connector],
        tmp_path,
        ws,
        {"telegram": [str(OWNER)]},
        state,
        {"telegram": [str(MEMBER)]},
        backend=backend,
        ask_timeout_s=2.0,
    )
    lt.run(setup.gateway.start())
    try:
        fake.say(who, who, ASK)
        wait_for(lambda: any(s.text == "finished" for s in fake.replies(who)), what="the answer")
    finally:
        lt.run(setup.gateway.stop())
    [chat] = setup.gateway.chats.values()
    return chat.session


def test_a_members_words_are_labelled_and_do_not_vouch_for_a_write(
    lt: LoopThread, fake: FakeTelegram, tmp_path: Path, ws: Path
) -> None:
    (ws / "notes.md").write_text("my notes\n")
    session = _run(lt, fake, tmp_path, ws, MEMBER)
    assert (ws / "notes.md").read_text() == "my notes\n"
    [refused] = [m for m in session.messages if isinstance(m, ToolMessage)]
    assert "appears only in a message from the chat member telegram:222" in refused.content
    for source in (session, Session.open(session.path)):  # type: ignore[arg-type]
        [asked] = [m for m in source.messages if isinstance(m, UserMessage)]
        assert asked.provenance == Provenance.member("telegram:222")


def test_control_the_owners_same_words_write_the_file(
    lt: LoopThread, fake: FakeTelegram, tmp_path: Path, ws: Path
) -> None:
    (ws / "notes.md").write_text("my notes\n")
    session = _run(lt, fake, tmp_path, ws, OWNER)
    assert (ws / "notes.md").read_text() == "moved"
    [asked] = [m for m in session.messages if isinstance(m, UserMessage)]
    assert asked.provenance is None
