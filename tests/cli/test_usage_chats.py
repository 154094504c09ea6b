"""Usage by gateway chat and each chat's daily budget, through the wiring the gateway uses
(``run_traced`` with the chat named), the real loop and traces, and `agent usage`."""

from __future__ import annotations

import json
import os
from pathlib import Path

from agent.events import ErrorEvent, Event, StepEvent, UsageEvent
from agent.loop import AgentLoop
from agent.messages import AssistantMessage, ToolCall
from agent.session import Session
from agent.tools import Toolbox, function_tool
from agent.trace import TraceWriter, read_trace
from agent.usage import read_usage, run_usage
from backends.fake import FakeBackend
from cli.config import load_settings
from cli.wiring import run_traced
from connectors.gateway import chat_of_session
from tests.cli.test_run import agent


def add(a: int, b: int) -> str:
    """Add two whole numbers."""
    return str(a + b)


def turn(settings_text: str, session_name: str) -> list[Event]:
    """One gateway turn in the chat whose session file is ``session_name``."""
    Path(os.environ["CLAWLOOP_CONFIG"]).write_text(settings_text, encoding="utf-8")
    settings = load_settings({"backend": "fake"})
    backend = FakeBackend(
        [
            AssistantMessage(content=None, tool_calls=[ToolCall.make("add", {"a": 2, "b": 3})]),
            AssistantMessage(content="2 + 3 = 5"),
        ]
    )
    loop = AgentLoop(backend, Toolbox([function_tool(add)]))
    session = Session.open(settings.sessions_dir / f"{session_name}.jsonl")
    extra = {"front_end": "gateway", "chat": chat_of_session(session)}
    return list(run_traced(settings, loop, session, "what is 2 + 3?", extra))


def tokens(events: list[Event]) -> int:
    [usage] = [e for e in events if isinstance(e, UsageEvent)]
    return usage.prompt_tokens + usage.completion_tokens


def test_the_chat_is_the_session_name_without_its_generation() -> None:
    assert chat_of_session(Session(Path("s/telegram-_100123-2.jsonl"))) == "telegram-_100123"
    assert chat_of_session(Session(Path("s/discord-42.jsonl"))) == "discord-42"
    assert chat_of_session(Session()) is None


def test_usage_by_chat_and_each_chats_daily_budget(tmp_path: Path) -> None:
    first = turn("", "telegram-42")
    again = turn("", "telegram-42-1")  # after /new: the same chat, a new session
    other = turn("", "discord-7")
    out = agent("usage", "--by", "chat", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = {row["key"]: row for row in map(json.loads, out.stdout.splitlines())}
    assert rows["telegram-42"]["runs"] == 2 and rows["discord-7"]["runs"] == 1
    spent = rows["telegram-42"]["prompt_tokens"] + rows["telegram-42"]["completion_tokens"]
    assert spent == tokens(first) + tokens(again)
    assert rows["total"]["runs"] == 3 and tokens(other) > 0

    # Room for one more model call in telegram-42 today: its next turn stops after it.
    budget = f"[budgets]\nchat_day_tokens = {spent + 1}\n"
    stopped = turn(budget, "telegram-42-1")
    [error] = [e for e in stopped if isinstance(e, ErrorEvent)]
    assert error.reason == "budget" and "[budgets] chat_day_tokens" in error.message
    assert "this chat today" in error.message
    # Another chat has its own allowance.
    assert not [e for e in turn(budget, "discord-7") if isinstance(e, ErrorEvent)]


def test_a_run_cut_short_is_summed_from_its_steps(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path, "abcdef12")
    writer.start(prompt="p", backend="fake", model=None, messages=[], tools=[])
    for prompt_tokens in (100, 150):
        writer.event(StepEvent(1, prompt_tokens, 40, 7, "tool_calls", AssistantMessage()))
    found = run_usage(read_trace(writer.path))
    assert found is not None
    assert (found.prompt_tokens, found.cached_tokens, found.completion_tokens) == (250, 80, 14)
    assert found.steps == 2
    assert [r.run_id for r in read_usage(tmp_path)] == ["abcdef12"]
