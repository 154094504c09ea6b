"""One turn of a chat: the agent loop in a worker thread, its events shown in the chat.

The loop is synchronous; its events cross into asyncio through a queue. While it works the chat
shows a typing indicator and one progress message edited in place; an ask is posted with its
``/approve ID`` command and buttons; the answer is sent in chunks, the first threaded to the
message it answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass, field

from agent.events import (
    ApprovalRequested,
    ApprovalResolved,
    ErrorEvent,
    Event,
    FinalEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from agent.run_context import RunContext
from connectors.base import Button, Connector, Incoming
from connectors.chunking import split_message
from connectors.logs import log

TYPING_EVERY_S = 4.0
_DONE = object()


@dataclass(slots=True)
class OpenAsk:
    """An ask posted in a chat, waiting for an owner's ``/approve`` or ``/deny``."""

    event: ApprovalRequested
    context: RunContext
    connector: Connector
    chat_id: str
    message_id: str
    text: str


@dataclass
class Turn:
    """Runs one message through the agent and shows the run in its chat."""

    connector: Connector
    message: Incoming
    run: Callable[[RunContext], Iterator[Event]]
    context: RunContext
    executor: Executor
    on_ask: Callable[[OpenAsk], None]
    on_ask_closed: Callable[[str], object]
    # An "always" answer: the allow rule it saved (the tool already added it to this run).
    on_always: Callable[[str], object] = lambda rule: None
    started: float = field(default_factory=time.monotonic)
    final_sent: bool = False
    silent: bool = False  # the gateway is shutting down: say nothing more in the chat
    _progress_id: str | None = None
    _progress: list[str] = field(default_factory=list)
    _asks: dict[str, OpenAsk] = field(default_factory=dict)

    async def play(self) -> bool:
        """Run to the end; True if the chat got its answer (or was told why there is none)."""
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[object] = asyncio.Queue()

        def produce() -> None:
            try:
                for event in self.run(self.context):
                    loop.call_soon_threadsafe(events.put_nowait, event)
            except BaseException as exc:  # surfaced on the asyncio side, where it is logged
                loop.call_soon_threadsafe(events.put_nowait, exc)
            finally:
                loop.call_soon_threadsafe(events.put_nowait, _DONE)

        worker = loop.run_in_executor(self.executor, produce)
        typing = asyncio.create_task(self._keep_typing())
        answered = False
        try:
            while True:
                item = await events.get()
                if item is _DONE:
                    break
                if isinstance(item, BaseException):
                    log(logging.ERROR, "turn_failed", chat=self.message.chat_key, error=repr(item))
                    await self._say(f"⚠ something went wrong on my side: {type(item).__name__}")
                    answered = True
                    continue
                answered = await self._show(item) or answered  # type: ignore[arg-type]
        except BaseException:
            # The chat side failed (or was cancelled): the run must not wait on it any longer.
            self.context.stop()
            raise
        finally:
            typing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await typing
            await worker
            for ask_id in list(self._asks):
                self.on_ask_closed(ask_id)
        return answered

    async def _show(self, event: Event) -> bool:
        if self.silent:
            return False
        if isinstance(event, ToolCallEvent):
            self._progress.append(f"⚙ {event.call.function.name} {_summary(event.call)}")
            await self._update_progress()
        elif isinstance(event, ToolResultEvent):
            mark = "✓" if event.ok else "✗"
            if self._progress:
                self._progress[-1] = f"{mark} {self._progress[-1][2:]} ({event.seconds:.1f} s)"
            await self._update_progress()
        elif isinstance(event, ApprovalRequested):
            await self._post_ask(event)
        elif isinstance(event, ApprovalResolved):
            await self._close_ask(event)
        elif isinstance(event, FinalEvent):
            await self._say(event.content or "(no answer)")
            self.final_sent = True
            return True
        elif isinstance(event, ErrorEvent):
            if self.context.cancel.is_set() and event.reason == "aborted":
                await self._say("⏹ stopped.")
            else:
                await self._say(f"⚠ {event.message}")
            return True
        return False

    async def _say(self, text: str) -> None:
        chunks = split_message(text, self.connector.max_length) or ["(empty answer)"]
        for i, chunk in enumerate(chunks):
            await self.connector.send(
                self.message.chat_id, chunk, reply_to=self.message.message_id if i == 0 else None
            )

    async def _update_progress(self) -> None:
        text = "\n".join(self._progress[-15:])
        text = text[: self.connector.max_length]
        try:
            if self._progress_id is None:
                self._progress_id = await self.connector.send(
                    self.message.chat_id, text, reply_to=self.message.message_id
                )
            else:
                await self.connector.edit(self.message.chat_id, self._progress_id, text)
        except Exception as exc:  # progress is a courtesy: the turn goes on without it
            log(logging.WARNING, "progress_failed", chat=self.message.chat_key, error=str(exc))

    async def _post_ask(self, event: ApprovalRequested) -> None:
        minutes = event.expires_in_s / 60
        text = (
            f"🔐 Approval needed: {_cut(event.summary, 700)}\n"
            f"why: {_cut(event.reason, 200)}\n"
            f"Reply /approve {event.id} or /deny {event.id} "
            f"(/approve {event.id} always also allows {_cut(event.suggestion, 300)} from now on). "
            f"Expires in {minutes:g} min."
        )
        buttons = [
            Button("Approve", f"/approve {event.id}"),
            Button("Always", f"/approve {event.id} always"),
            Button("Deny", f"/deny {event.id}"),
        ]
        try:
            message_id = await self.connector.send(
                self.message.chat_id, text, reply_to=self.message.message_id, buttons=buttons
            )
        except Exception as exc:
            # Nobody can see the question, so nobody can answer it: refuse now.
            log(logging.ERROR, "ask_post_failed", chat=self.message.chat_key, error=str(exc))
            self.context.approvals.answer(event.id, "deny", "the request could not be posted")
            return
        ask = OpenAsk(event, self.context, self.connector, self.message.chat_id, message_id, text)
        self._asks[event.id] = ask
        self.on_ask(ask)

    async def _close_ask(self, event: ApprovalResolved) -> None:
        ask = self._asks.pop(event.id, None)
        self.on_ask_closed(event.id)
        if ask is None:
            return
        if event.outcome == "always" and ask.event.suggestion:
            self.on_always(ask.event.suggestion)
        words = {
            "once": "✅ approved",
            "always": "✅ approved (always)",
            "deny": "🚫 denied",
            "expired": "⌛ expired: not run",
            "cancelled": "⏹ cancelled",
        }
        note = f"{ask.text.splitlines()[0]}\n{words.get(event.outcome, event.outcome)} ({event.by})"
        try:
            await self.connector.edit(ask.chat_id, ask.message_id, note)
        except Exception as exc:
            log(logging.WARNING, "ask_edit_failed", chat=self.message.chat_key, error=str(exc))

    async def _keep_typing(self) -> None:
        while True:
            try:
                await self.connector.typing(self.message.chat_id)
            except Exception as exc:
                log(logging.DEBUG, "typing_failed", error=str(exc))
            await asyncio.sleep(TYPING_EVERY_S)


def _summary(call: object, width: int = 60) -> str:
    """A short argument summary for the progress line: the first argument's value."""
    raw = getattr(getattr(call, "function", None), "arguments", "") or ""
    try:
        args = json.loads(raw)
    except (TypeError, ValueError):
        args = raw
    if isinstance(args, dict) and args:
        value = next(iter(args.values()))
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    else:
        text = str(args)
    text = " ".join(text.split())
    return f"`{text[:width]}{'…' if len(text) > width else ''}`" if text else ""


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width] + " …"
