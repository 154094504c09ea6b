"""The page's chats: one session per browser tab, its turn run in a thread, its asks answered.

A turn runs exactly as a chat connector's does (see ``connectors/gateway.py``): its own
:class:`~agent.run_context.RunContext`, attended by a person, starting with every allow rule an
"always" answer added since the server started. An approve button resolves the run's ask through
``context.approvals.answer``, the path the terminal and the chat bots' ``/approve`` take; the
Stop button is ``context.stop()``, the chats' ``/stop``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.approvals import Answer
from agent.events import ApprovalRequested, ApprovalResolved, Event
from agent.run_context import RunContext
from agent.session import Session, check_session_name
from connectors.web.stream import browser_event

RunFn = Callable[[Session, str, RunContext], Iterator[Event]]
ANSWERED_BY = "a person via the web page"
# How long a turn cut off by its page (closed, reloaded) gets to end after it is stopped.
STOP_GRACE_S = 15.0
_DONE = object()


@dataclass
class WebChat:
    """One tab's conversation, and its turn when one is running."""

    name: str
    session: Session
    running: RunContext | None = None
    asks: dict[str, ApprovalRequested] = field(default_factory=dict)


class WebChats:
    """Every tab's chat, by session name; turns of different tabs run concurrently."""

    def __init__(
        self,
        run: RunFn,
        sessions_dir: Path,
        ask_timeout_s: float,
        max_turns_at_once: int = 8,
        always: list[str] | None = None,
    ) -> None:
        self.run = run
        self.sessions_dir = sessions_dir
        self.ask_timeout_s = ask_timeout_s
        self.chats: dict[str, WebChat] = {}
        # Allow rules said "always" to since the start; inside the gateway, its very list.
        self.always: list[str] = always if always is not None else []
        self._executor = ThreadPoolExecutor(
            max_workers=max_turns_at_once, thread_name_prefix="turn"
        )

    def chat(self, name: str) -> WebChat:
        """The tab's chat; its session is read from the sessions folder if it exists there."""
        check_session_name(name)
        chat = self.chats.get(name)
        if chat is None:
            self.sessions_dir.mkdir(parents=True, exist_ok=True)
            chat = WebChat(name, Session.open(self.sessions_dir / f"{name}.jsonl"))
            self.chats[name] = chat
        return chat

    def busy(self, name: str) -> bool:
        """Whether the tab's session has a turn running."""
        return self.chat(name).running is not None

    async def settle(self, name: str, grace_s: float = STOP_GRACE_S) -> bool:
        """Whether the tab's session is free for a turn, once a stopped turn has ended.

        A turn that was stopped (its page closed or reloaded, or Stop pressed) still writes its
        last tool result; a message sent meanwhile waits for that, up to ``grace_s``, rather than
        being refused. A turn still running normally is not waited for.
        """
        deadline = asyncio.get_running_loop().time() + grace_s
        while (running := self.chat(name).running) is not None:
            if not running.cancel.is_set() or asyncio.get_running_loop().time() > deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    async def play(self, name: str, text: str) -> AsyncGenerator[dict[str, Any], None]:
        """Run one turn; yields what the page shows, as it happens.

        The session is claimed when the stream starts, not before, so a stream that never
        starts (its page gone first) leaves nothing claimed.
        """
        chat = self.chat(name)
        if chat.running is not None:
            yield {"type": "error", "message": "a turn is already running here", "reason": "busy"}
            return
        context = chat.running = RunContext(
            ask_timeout_s=self.ask_timeout_s, allowed=list(self.always), attended=True
        )

        def release() -> None:
            """Free the session for its next turn; only once its thread has written its last."""
            chat.running = None
            chat.asks.clear()
            context.close()

        turn = _Turn(lambda: self.run(chat.session, text, context), context, release)
        try:
            events = _in_thread(turn, self._executor)
            # Closed with the page's stream, so a page that went away stops its run.
            async with contextlib.aclosing(events):
                async for item in events:
                    if isinstance(item, BaseException):
                        yield {
                            "type": "error",
                            "message": f"something went wrong on the server: {type(item).__name__}",
                            "reason": "server",
                        }
                        continue
                    self._track(chat, item)
                    shown = browser_event(item, context.cancel.is_set())
                    if shown is not None:
                        yield shown
        finally:
            if not turn.started:
                release()  # the stream ended before the thread began: nothing will write

    def _track(self, chat: WebChat, event: Event) -> None:
        if isinstance(event, ApprovalRequested):
            chat.asks[event.id] = event
        elif isinstance(event, ApprovalResolved):
            ask = chat.asks.pop(event.id, None)
            # The tool saved the rule and allowed it for this run; later turns start with it.
            rule = ask.suggestion if ask is not None and event.outcome == "always" else ""
            if rule and rule not in self.always:
                self.always.append(rule)

    def answer(self, name: str, ask_id: str, answer: Answer) -> bool:
        """Answer the tab's open ask; False if there is none with that id."""
        chat = self.chats.get(name)
        if chat is None or chat.running is None:
            return False
        ask = chat.asks.get(ask_id)
        if ask is None:
            return False
        if ask.person_only and answer == "always":
            answer = "once"  # a data-flow ask is about this call's arguments: no rule to save
        return chat.running.approvals.answer(ask_id, answer, ANSWERED_BY)

    def stop(self, name: str) -> bool:
        """Stop the tab's running turn; False if nothing runs."""
        chat = self.chats.get(name)
        if chat is None or chat.running is None:
            return False
        chat.running.stop()
        return True

    def close(self) -> None:
        """Stop every running turn and let go of the threads."""
        for chat in self.chats.values():
            if chat.running is not None:
                chat.running.stop()
        self._executor.shutdown(wait=False, cancel_futures=True)


@dataclass
class _Turn:
    """One turn's work, its context, and who frees its session once the work has ended."""

    produce_events: Callable[[], Iterator[Event]]
    context: RunContext
    release: Callable[[], None]
    started: bool = False


async def _in_thread(
    turn: _Turn, executor: Executor
) -> AsyncGenerator[Event | BaseException, None]:
    """The synchronous loop's events, crossing into asyncio through a queue.

    If the page goes away mid-turn (the stream is closed), the run is stopped: nobody is left
    to answer its asks or read its answer. Its session is released when its thread ends, never
    before: a stopped turn still writes its last tool result, and a next turn started earlier
    would find that result after its own message.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[object] = asyncio.Queue()

    def produce() -> None:
        try:
            for event in turn.produce_events():
                loop.call_soon_threadsafe(queue.put_nowait, event)
        except BaseException as exc:  # shown on the page; the server goes on
            loop.call_soon_threadsafe(queue.put_nowait, exc)
        finally:
            loop.call_soon_threadsafe(queue.put_nowait, _DONE)

    worker = loop.run_in_executor(executor, produce)
    turn.started = True
    worker.add_done_callback(lambda _: turn.release())
    try:
        while (item := await queue.get()) is not _DONE:
            yield item  # type: ignore[misc]
        # The thread has sent its last event and is returning: once it has, the session is
        # released (the callback above runs first), before the page's stream ends.
        await worker
    finally:
        if not worker.done():
            turn.context.stop()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(worker), STOP_GRACE_S)
