"""A tab's session stays claimed until its stopped turn has written its last message.

The turn here is a plain function standing in for the agent loop (the loop itself is exercised
end to end in ``test_web_stream.py``): it is slow to end once stopped, as a shell call is while
its sandbox is torn down, so the order of the session's messages depends on the claim alone.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import anyio

from agent.events import Event, FinalEvent, ToolResultEvent
from agent.messages import ToolMessage, UserMessage
from agent.run_context import RunContext
from agent.session import Session
from connectors.web.chat import WebChats

ENDS_AFTER_STOP_S = 0.5


def slow_to_stop(session: Session, text: str, context: RunContext) -> Iterator[Event]:
    session.append(UserMessage(content=text))
    if text == "long job":
        yield ToolResultEvent(call_id="c1", name="shell", content="started", ok=True)
        context.cancel.wait(30)
        time.sleep(ENDS_AFTER_STOP_S)  # the sandbox is still being torn down
        session.append(ToolMessage(tool_call_id="c1", content="error: stopped"))
        return
    yield FinalEvent(content=f"echo: {text}")


def test_a_cancelled_stream_keeps_the_session_until_its_thread_ends(tmp_path: Path) -> None:
    chats = WebChats(slow_to_stop, tmp_path / "sessions", ask_timeout_s=5)

    async def scenario() -> list[bool]:
        await _close_the_page_mid_turn(chats)
        busy_right_after = chats.busy("tab")
        deadline = time.monotonic() + 10
        while chats.busy("tab") and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        return [busy_right_after, chats.busy("tab")]

    try:
        busy_then, busy_later = asyncio.run(scenario())
        assert busy_then, "the session was freed while its turn was still writing"
        assert not busy_later, "the session was never freed"
        asyncio.run(_drain(chats.play("tab", "still there?")))
    finally:
        chats.close()
    roles = [(m.role, m.content) for m in chats.chat("tab").session.messages]
    assert roles == [
        ("user", "long job"),
        ("tool", "error: stopped"),
        ("user", "still there?"),
    ]


async def _close_the_page_mid_turn(chats: WebChats) -> None:
    """Start the long job on the tab, and close its page once the job's first result shows."""
    seen = asyncio.Event()

    async def page() -> None:
        async for shown in chats.play("tab", "long job"):
            if shown["type"] == "tool_result":
                seen.set()

    # As the server's streaming response does when its client goes away: the stream's task
    # group is cancelled, and anyio keeps cancelling every await inside it.
    async with anyio.create_task_group() as group:
        group.start_soon(page)
        await asyncio.wait_for(seen.wait(), 10)
        group.cancel_scope.cancel()


async def _drain(events: object) -> None:
    async for _ in events:  # type: ignore[attr-defined]
        pass


def test_a_message_sent_while_a_stopped_turn_ends_waits_for_it(tmp_path: Path) -> None:
    chats = WebChats(slow_to_stop, tmp_path / "sessions", ask_timeout_s=5)

    async def scenario() -> tuple[bool, bool]:
        await _close_the_page_mid_turn(chats)
        busy_when_sent = chats.busy("tab")
        # The next message comes at once, as from a reloaded tab: it waits, it is not refused.
        return busy_when_sent, await chats.settle("tab")

    try:
        busy_when_sent, free = asyncio.run(scenario())
    finally:
        chats.close()
    assert busy_when_sent, "the stopped turn had already ended: nothing was waited for"
    assert free


def test_a_turn_still_running_is_not_waited_for(tmp_path: Path) -> None:
    chats = WebChats(slow_to_stop, tmp_path / "sessions", ask_timeout_s=5)

    async def scenario() -> tuple[bool, float]:
        seen = asyncio.Event()
        events = chats.play("tab", "long job")

        async def page() -> None:
            async for shown in events:
                if shown["type"] == "tool_result":
                    seen.set()

        task = asyncio.create_task(page())
        await asyncio.wait_for(seen.wait(), 10)
        started = time.monotonic()
        free = await chats.settle("tab")
        waited = time.monotonic() - started
        chats.stop("tab")
        await task
        return free, waited

    try:
        free, waited = asyncio.run(scenario())
    finally:
        chats.close()
    assert not free
    assert waited < 1.0
