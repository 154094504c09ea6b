"""A 300-message Telegram chat on the bundled model keeps answering and, asked at the end,
says back the name given in message 3: compaction and memory at work.

The real gateway, the real python-telegram-bot client against the local Bot API server, and the
real bundled model (llama.cpp, small-model profile, shipped adapter) on a 2048-token context, so
that the chat passes its budget many times over. Without compaction the backend would refuse
every message after the first few dozen ("more than the model's context"). The name reaches
the last answer through memory: the small profile stores the user's own words when told a fact
about the user, and offers `recall` for a question about the user.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_telegram import TOKEN, FakeTelegram
from loopthread import LoopThread, wait_for

from agent.session import Session
from cli.config import load_settings
from cli.wiring import build_backend, build_loop, settings_toolbox
from connectors.access import AccessList
from connectors.gateway import Gateway, GatewayAgent, GatewayOptions
from connectors.state import GatewayState
from connectors.telegram_bot import TelegramConnector

pytest.importorskip("llama_cpp", reason="the bundled model's backend (installed by the README)")

OWNER = 111
SMALL_TALK = [
    "hi!",
    "thanks",
    "good morning",
    "how are you?",
    "ok, nice",
    "what can you do?",
    "great, thank you",
    "hello again",
]


@pytest.mark.slow
@pytest.mark.timeout(1500)  # 150 turns of the real model: a few minutes on two idle cores
def test_a_300_message_chat_keeps_answering_and_keeps_its_first_facts(
    lt: LoopThread, fake: FakeTelegram, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    settings = load_settings(
        {
            "workspace": str(ws),
            "data_dir": str(tmp_path / "data"),
            "backends": {"llamacpp": {"n_ctx": 2048}},
        }
    )
    backend = build_backend(settings)
    loop = build_loop(settings, backend, settings_toolbox(settings, None, lambda *_: None))
    assert loop.compactor is not None and loop.compactor.policy.budget_tokens == 1536
    state = GatewayState(tmp_path / "state.json")
    connector = TelegramConnector(TOKEN, state, fake.base_url, poll_timeout=1)
    access = AccessList(tmp_path / "pairing.json", {"telegram": [str(OWNER)]}, {})
    sessions = tmp_path / "sessions"
    # One person, many turns. The small model sometimes calls a tool that asks first (copying
    # a file, say); the owner does not answer, and the ask expires after a second.
    options = GatewayOptions(rate_per_minute=60_000, rate_burst=1000, ask_timeout_s=1.0)
    gateway = Gateway([connector], GatewayAgent(loop, "llamacpp"), sessions, access, state, options)
    lt.run(gateway.start())
    said = ["hello", "My name is Zorblat and my cat is called Pixel."]
    said += [SMALL_TALK[i % len(SMALL_TALK)] for i in range(147)]
    said.append("What is my name?")
    assert len(said) == 150  # with a reply each: 300 messages
    for n, text in enumerate(said, 1):
        fake.say(OWNER, OWNER, text)
        wait_for(lambda n=n: len(answers(fake)) >= n, timeout=300, what=f"reply {n}")
    lt.run(gateway.stop())
    replies = answers(fake)
    assert len(replies) == 150
    # Some small-talk turns may end in an error from the model's own mistakes; none may end
    # because the conversation outgrew the model's context.
    assert not [r for r in replies if "context" in r and r.startswith("⚠")], replies
    [path] = sessions.glob("*.jsonl")
    session = Session.open(path)
    assert len(session.compactions) >= 3  # the chat passed its budget again and again
    assert session.skipped_lines == 0
    assert sum(m.role == "user" for m in session.messages) == 150  # nothing was lost on disk
    # The fact from message 3 is in what the model was sent for message 299.
    assert "Zorblat" in (session.summary or "") and "Pixel" in (session.summary or "")
    assert session.compacted < len(session.messages) - 2
    # And the model itself says it back.
    assert "Zorblat" in replies[-1], replies[-1]


def answers(fake: FakeTelegram) -> list[str]:
    """The bot's final replies (tool progress and approval asks left out)."""
    return [s.text for s in fake.replies(OWNER) if not s.text.startswith(("⚙", "✓", "✗", "🔐"))]
