"""The gateway: every enabled connector in one asyncio process, one session per chat.

A message goes: duplicate check → who is it (owner, allowed, paired, stranger) → group mention
rule → rate limit → chat command or agent turn. Strangers get a pairing code and never reach the
model or a tool. Turns in one chat run one at a time, in order; chats run concurrently, each turn
on its own run context.

An "always" answer allows the rest of its turn at once (the run's overlay) and is saved to the
config file by the tool; every turn that starts afterwards, in any chat, begins with it in its
overlay, as it would after a restart. A turn already running elsewhere is not changed.

A file sent by an owner is saved into the workspace's inbox when ``accept_files`` is on (and it
is within ``max_file_bytes``); the turn is told where. Anyone else's file is never downloaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from agent.events import Event
from agent.loop import AgentLoop
from agent.messages import AssistantMessage, ToolMessage
from agent.provenance import Provenance
from agent.run_context import RunContext
from agent.runs import TracedRuns
from agent.session import Session
from agent.terminal_text import escape_controls
from connectors.access import AccessList
from connectors.base import Connector, FileTooLarge, Incoming
from connectors.chunking import split_message
from connectors.inbox import save_file, saved_note
from connectors.logs import LOGGER, log
from connectors.ratelimit import RateLimiter
from connectors.state import GatewayState
from connectors.turn import OpenAsk, Turn

TEXT_ONLY = "Sorry, I handle text only for now."
INTERRUPTED = "error: this call was interrupted (the gateway restarted); it may not have finished"


@dataclass(slots=True)
class GatewayOptions:
    """Knobs of the gateway itself."""

    ask_timeout_s: float = 600.0
    rate_per_minute: float = 20.0
    rate_burst: int = 5
    max_turns_at_once: int = 64
    shutdown_grace_s: float = 10.0
    accept_files: bool = False  # save owners' files into ``workspace``'s inbox
    max_file_bytes: int = 20 * 1024 * 1024
    workspace: Path | None = None


@dataclass(frozen=True, slots=True)
class GatewayAgent:
    """The agent every chat talks to: its loop, the model's name for ``/status``, and what
    starts a turn's run with its trace (built by whoever wired the gateway); without ``runs``,
    turns run the loop untraced."""

    loop: AgentLoop
    model_name: str = ""
    runs: TracedRuns | None = None


@dataclass
class ChatSession:
    """One chat's conversation and its queue of messages waiting for their turn."""

    key: str
    name: str
    session: Session
    queue: asyncio.Queue[Incoming] = field(default_factory=asyncio.Queue)
    worker: asyncio.Task[None] | None = None
    running: Turn | None = None


class Gateway:
    """Routes messages from the connectors to per-chat sessions of one agent loop."""

    def __init__(
        self,
        connectors: list[Connector],
        agent: GatewayAgent,
        sessions_dir: Path,
        access: AccessList,
        state: GatewayState,
        options: GatewayOptions | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.connectors = {c.name: c for c in connectors}
        self.agent = agent
        self.sessions_dir = sessions_dir
        self.access = access
        self.state = state
        self.options = options or GatewayOptions()
        self.limiter = RateLimiter(self.options.rate_per_minute, self.options.rate_burst, clock)
        self.chats: dict[str, ChatSession] = {}
        self.asks: dict[str, OpenAsk] = {}
        self.always: list[str] = []  # allow rules said "always" to since the start
        self.stopping = False
        self._executor = ThreadPoolExecutor(
            max_workers=self.options.max_turns_at_once, thread_name_prefix="turn"
        )

    # -- life cycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Resume turns cut short last time, then connect every connector."""
        for message in self.state.unfinished():
            if message.platform in self.connectors:
                log(logging.INFO, "resuming", message=message.key)
                self._chat(message).queue.put_nowait(message)
        for connector in self.connectors.values():
            await connector.start(self.receive)
            log(logging.INFO, "connected", connector=connector.name)

    async def stop(self) -> None:
        """Stop taking messages, cancel running turns, wait for them (bounded), persist."""
        self.stopping = True
        for connector in self.connectors.values():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(connector.stop(), timeout=3)
        workers = []
        for chat in self.chats.values():
            if chat.worker is None:
                continue
            if chat.running is None:
                chat.worker.cancel()  # idle: waiting for a message that will not come
            else:
                chat.running.silent = True  # its message stays in flight, for the restart
                chat.running.context.stop()
                workers.append(chat.worker)
        if workers:
            _, late = await asyncio.wait(workers, timeout=self.options.shutdown_grace_s)
            for task in late:
                task.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)
        log(logging.INFO, "stopped")

    # -- routing ------------------------------------------------------------------------------

    async def receive(self, message: Incoming) -> None:
        """Entry point for every connector; returns once the message is safely recorded."""
        if self.stopping or self.state.seen(message.key):
            return
        if message.chat_kind == "group" and not message.addressed:
            return  # in groups the bot speaks only when spoken to
        role = self.access.role(message.user)
        allowed, warn = self.limiter.allow(message.user)
        if not allowed:
            if warn:
                await self._reply(message, "You are sending messages too fast; slow down a little.")
            self.state.finish(message.key)
            return
        if role == "stranger":
            await self._refuse_stranger(message)
            return
        if message.files and not (self._takes_files() and role == "owner"):
            message.files = []  # never downloaded: only the owner's, and only if allowed
        if message.text is None and not message.files:
            await self._reply(message, TEXT_ONLY)
            self.state.finish(message.key)
            return
        command, _, rest = (message.text or "").strip().partition(" ")
        command = command.split("@", 1)[0].lower()
        handler = {
            "/approve": self._cmd_approve,
            "/deny": self._cmd_deny,
            "/stop": self._cmd_stop,
            "/status": self._cmd_status,
        }.get(command)
        if handler is not None:
            await handler(message, rest.strip(), role)
            self.state.finish(message.key)
            return
        if message.from_button:
            return  # a button that is not a command: nothing to do
        if not self.state.begin(message):
            return
        self._chat(message).queue.put_nowait(message)

    async def _refuse_stranger(self, message: Incoming) -> None:
        code = await asyncio.to_thread(self.access.code_for, message.user, message.sender_name)
        log(logging.INFO, "stranger", user=message.user, chat=message.chat_key)
        await self._reply(
            message,
            f"Hi! I only talk to people my owner knows. Your pairing code is {code}: "
            f"ask the owner to run `agent pairing approve {code}`.",
        )
        self.state.finish(message.key)

    # -- commands -----------------------------------------------------------------------------

    async def _cmd_approve(self, message: Incoming, rest: str, role: str) -> None:
        ask_id, _, how = rest.partition(" ")
        answer = "always" if how.strip().lower() == "always" else "once"
        await self._answer(message, ask_id, answer, role)

    async def _cmd_deny(self, message: Incoming, rest: str, role: str) -> None:
        await self._answer(message, rest.split(" ", 1)[0], "deny", role)

    async def _answer(self, message: Incoming, ask_id: str, answer: str, role: str) -> None:
        if role != "owner":
            log(logging.WARNING, "approve_refused", user=message.user, ask=ask_id)
            await self._reply(message, "Only the owner can answer approval requests.")
            return
        ask = self.asks.get(ask_id)
        by = f"{message.sender_name or message.user} via {message.platform}"
        if ask is None or not ask.context.approvals.answer(ask_id, answer, by):  # type: ignore[arg-type]
            await self._reply(message, f"There is no open approval request {ask_id or '(no id)'}.")
            return
        if message.chat_id != ask.chat_id or message.from_button:
            await self._reply(message, f"{answer if answer != 'once' else 'approved'}: {ask_id}")

    async def _cmd_stop(self, message: Incoming, rest: str, role: str) -> None:
        chat = self.chats.get(message.chat_key)
        if chat is None or chat.running is None:
            await self._reply(message, "Nothing is running.")
            return
        chat.running.context.stop()  # the turn itself says "stopped."

    async def _cmd_status(self, message: Incoming, rest: str, role: str) -> None:
        chat = self._chat(message)
        running = chat.running
        lines = [
            f"model: {self.agent.model_name or 'default'}",
            f"session: {chat.name} ({len(chat.session.messages)} messages)",
        ]
        if running is not None and not running.final_sent:  # answered: only its ending is left
            text = (running.message.text or "")[:80]
            lines.append(f"running: {text!r} for {time.monotonic() - running.started:.0f} s")
        else:
            lines.append("running: nothing")
        lines.append(f"waiting: {chat.queue.qsize()} message(s)")
        await self._reply(message, "\n".join(lines))

    # -- sessions and turns -------------------------------------------------------------------

    def _chat(self, message: Incoming) -> ChatSession:
        chat = self.chats.get(message.chat_key)
        if chat is None:
            generation = int(self.state.cursor(f"session:{message.chat_key}") or 0)
            name = _session_name(message, generation)
            session = Session.open(self.sessions_dir / f"{name}.jsonl")
            chat = ChatSession(message.chat_key, name, session)
            self.chats[message.chat_key] = chat
        if chat.worker is None or chat.worker.done():
            chat.worker = asyncio.create_task(self._work(chat))
        return chat

    def _new_session(self, chat: ChatSession, message: Incoming) -> None:
        generation = int(self.state.cursor(f"session:{chat.key}") or 0) + 1
        self.state.set_cursor(f"session:{chat.key}", generation)
        chat.name = _session_name(message, generation)
        chat.session = Session.open(self.sessions_dir / f"{chat.name}.jsonl")

    async def _work(self, chat: ChatSession) -> None:
        while not self.stopping:
            message = await chat.queue.get()
            if self.stopping:
                return
            try:
                await self._handle(chat, message)
            except Exception:  # one bad turn must not end the chat's worker
                logging.getLogger(LOGGER).exception(
                    "handle_failed", extra={"fields": {"message": message.key}}
                )

    async def _handle(self, chat: ChatSession, message: Incoming) -> None:
        connector = self.connectors[message.platform]
        text = message.text or ""
        if text.strip().split("@", 1)[0].lower() == "/new":
            self._new_session(chat, message)
            await self._reply(message, f"Started a new session ({chat.name}).")
            self.state.finish(message.key)
            return
        if message.files:
            text = await self._take_files(message, text)
            if not text:
                self.state.finish(message.key)
                return
        _close_dangling_calls(chat.session)
        # The chat's owner answers asks with /approve: a person attends the run.
        context = RunContext(
            ask_timeout_s=self.options.ask_timeout_s, allowed=list(self.always), attended=True
        )
        if self.access.role(message.user) != "owner":
            # A paired or allowed member may talk to the agent, but their words are not the
            # owner's: the data-flow gate treats them as it treats a mail. In a private chat no
            # owner is there to answer its ask, so it is refused at once rather than left to
            # run out.
            context.task_provenance = Provenance.member(message.user)
            context.attended = message.chat_kind != "private"
        session = chat.session
        turn = Turn(
            connector,
            message,
            lambda ctx: self._run(session, text, ctx),
            context,
            self._executor,
            on_ask=lambda ask: self.asks.__setitem__(ask.event.id, ask),
            on_ask_closed=lambda ask_id: self.asks.pop(ask_id, None),
            on_always=self._remember_always,
        )
        chat.running = turn
        log(logging.INFO, "turn_started", message=message.key, run=context.run_id)
        try:
            answered = await turn.play()
        finally:
            chat.running = None
            context.close()
        if self.stopping and not turn.final_sent:
            log(logging.INFO, "turn_cut_by_shutdown", message=message.key)
            return  # left in flight: answered after the restart
        if not answered:
            await self._reply(message, "(no answer)")
        self.state.finish(message.key)
        log(logging.INFO, "turn_done", message=message.key, run=context.run_id)

    def _run(self, session: Session, text: str, context: RunContext) -> Iterator[Event]:
        runs = self.agent.runs
        if runs is None:
            return self.agent.loop.run(session, text, context)
        extra = {"front_end": "gateway", "chat": chat_of_session(session)}
        return runs.run(session, text, extra, context)

    async def run_scheduled(
        self,
        platform: str,
        chat_id: str,
        title: str,
        run: Callable[[RunContext], Iterator[Event]],
        run_id: str,
    ) -> bool:
        """A scheduled job's run, shown in a chat as a turn: progress, asks (/approve), answer.

        Returns whether the chat got an answer. Only owners can approve its asks, as in a turn.
        """
        connector = self.connectors[platform]
        message = Incoming(platform, chat_id, "private", "scheduler", title, "", title)
        context = RunContext(
            run_id=run_id,
            ask_timeout_s=self.options.ask_timeout_s,
            allowed=list(self.always),
            attended=True,
        )
        turn = Turn(
            connector,
            message,
            run,
            context,
            self._executor,
            on_ask=lambda ask: self.asks.__setitem__(ask.event.id, ask),
            on_ask_closed=lambda ask_id: self.asks.pop(ask_id, None),
            on_always=self._remember_always,
        )
        log(logging.INFO, "scheduled_turn_started", chat=message.chat_key, run=run_id)
        try:
            return await turn.play()
        finally:
            context.close()

    def _takes_files(self) -> bool:
        return self.options.accept_files and self.options.workspace is not None

    async def _take_files(self, message: Incoming, text: str) -> str:
        """Save the message's files; returns the turn's text with a note of where they are."""
        connector = self.connectors[message.platform]
        workspace = self.options.workspace
        limit = self.options.max_file_bytes
        notes, problems = [], []
        for file in message.files:
            try:
                data = await connector.download(file, limit)
                if workspace is None:  # _takes_files checked it; a bug if it changed since
                    raise RuntimeError("no workspace to save files in")
                path = await asyncio.to_thread(save_file, workspace, file.name, data)
            except FileTooLarge as exc:
                problems.append(f"{file.name} is too big ({exc.size} bytes; the limit is {limit})")
                continue
            except Exception as exc:  # one file that cannot be fetched must not end the turn
                log(logging.WARNING, "file_failed", message=message.key, error=repr(exc))
                problems.append(f"{file.name} could not be saved")
                continue
            log(logging.INFO, "file_saved", message=message.key, path=str(path), size=len(data))
            notes.append(saved_note(path))
        if problems:
            await self._reply(message, "Not saved: " + "; ".join(problems) + ".")
        if not notes:
            return text
        return "\n\n".join([text, *notes] if text else notes)

    def _remember_always(self, rule: str) -> None:
        if rule not in self.always:
            self.always.append(rule)
            log(logging.INFO, "always_allowed", rule=rule)

    async def _reply(self, message: Incoming, text: str) -> None:
        connector = self.connectors.get(message.platform)
        if connector is None:
            return
        # Control characters shown (as ^[) before splitting, so the chunks are sized as sent.
        for i, chunk in enumerate(split_message(escape_controls(text), connector.max_length)):
            try:
                await connector.send(
                    message.chat_id, chunk, reply_to=message.message_id if i == 0 else None
                )
            except Exception as exc:
                log(logging.WARNING, "send_failed", chat=message.chat_key, error=str(exc))
                return


def _session_name(message: Incoming, generation: int) -> str:
    chat = "".join(ch if ch.isalnum() else "_" for ch in message.chat_id)
    return f"{message.platform}-{chat}" + (f"-{generation}" if generation else "")


def chat_of_session(session: Session) -> str | None:
    """The chat a gateway session belongs to, as its name says (``telegram-42`` for
    ``telegram-42-3``, the third session of that chat); None for a session without a file."""
    if session.path is None:
        return None
    return "-".join(session.path.stem.split("-")[:2])


def _close_dangling_calls(session: Session) -> None:
    """A turn killed mid-tool left calls without results: answer them so the history is valid."""
    answered = {m.tool_call_id for m in session.messages if isinstance(m, ToolMessage)}
    for m in list(session.messages):
        if isinstance(m, AssistantMessage) and m.tool_calls:
            for call in m.tool_calls:
                if call.id not in answered:
                    session.append(
                        ToolMessage(
                            tool_call_id=call.id, name=call.function.name, content=INTERRUPTED
                        )
                    )
                    answered.add(call.id)
