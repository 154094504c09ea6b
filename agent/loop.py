"""The agent loop: request, generate, dispatch tool calls, append observations, repeat."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from agent.approvals import Gate, GatedTool, Verdict
from agent.backend import Backend, Completion, TextDelta
from agent.errors import ToolError, UserError
from agent.events import (
    ApprovalRequested,
    ApprovalResolved,
    ErrorEvent,
    Event,
    FinalEvent,
    TokenEvent,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
)
from agent.messages import (
    AssistantMessage,
    ChatRequest,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from agent.run_context import RunContext
from agent.session import Session
from agent.tools import Tool, Toolbox
from agent.validation import check_call


@dataclass(slots=True)
class Decoding:
    """Decoding settings sent with every request."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_tokens: int | None = None
    seed: int | None = None


@dataclass(slots=True)
class LoopLimits:
    """When the loop gives up."""

    max_steps: int = 12
    time_budget_s: float | None = None
    tool_timeout_s: float = 300.0
    max_observation_chars: int = 16_000


@dataclass
class AgentLoop:
    """Runs one task to a final answer, yielding events as it goes."""

    backend: Backend
    toolbox: Toolbox
    system_prompt: str | None = None
    limits: LoopLimits = field(default_factory=LoopLimits)
    decoding: Decoding = field(default_factory=Decoding)
    model: str | None = None
    cancel: threading.Event = field(default_factory=threading.Event)

    def run(
        self, session: Session, task: str, context: RunContext | None = None
    ) -> Iterator[Event]:
        """Add ``task`` as a user message to ``session`` and work on it until a final answer.

        ``context`` is the run's own state (id, cancel token, tool threads, open approvals);
        without one, the run gets a fresh context whose cancel token is ``self.cancel``.
        """
        owned = context is None
        ctx = context if context is not None else RunContext(cancel=self.cancel)
        if self.system_prompt and not any(m.role == "system" for m in session.messages):
            session.append(SystemMessage(content=self.system_prompt))
        session.append(UserMessage(content=task))
        start = time.monotonic()
        usage = UsageEvent(0, 0, 0, 0, 0.0)
        try:
            yield from self._steps(session, start, usage, ctx)
        finally:
            ctx.approvals.cancel_all()
            if owned:
                ctx.close()
            usage.seconds = time.monotonic() - start
            yield usage

    def _steps(
        self, session: Session, start: float, usage: UsageEvent, ctx: RunContext
    ) -> Iterator[Event]:
        while True:
            if usage.steps >= self.limits.max_steps:
                yield ErrorEvent(
                    f"stopped after {usage.steps} steps without a final answer "
                    f"(raise --max-steps to allow more)",
                    "max_steps",
                )
                return
            if self._out_of_time(start):
                yield ErrorEvent(
                    f"stopped: the time budget of {self.limits.time_budget_s:g} s ran out",
                    "time_budget",
                )
                return
            if ctx.cancel.is_set():
                yield ErrorEvent("stopped by the user", "aborted")
                return
            usage.steps += 1
            completion: Completion | None = None
            try:
                for event in self.backend.generate(self._request(session.messages)):
                    if isinstance(event, TextDelta):
                        yield TokenEvent(event.text)
                    else:
                        completion = event
                    if ctx.cancel.is_set():
                        break
            except UserError as exc:
                yield ErrorEvent(exc.message, "backend")
                return
            if completion is None:
                yield ErrorEvent(
                    "stopped by the user"
                    if ctx.cancel.is_set()
                    else "the backend ended without a reply",
                    "aborted",
                )
                return
            usage.prompt_tokens += completion.usage.prompt_tokens
            usage.completion_tokens += completion.usage.completion_tokens
            usage.cached_tokens += completion.usage.cached_tokens
            message = completion.message
            session.append(message)
            if not message.tool_calls:
                yield FinalEvent(message.content or "")
                return
            for call in message.tool_calls:
                yield ToolCallEvent(call)
                result = yield from self._dispatch(call, ctx)
                session.append(
                    ToolMessage(
                        tool_call_id=call.id, name=call.function.name, content=result.content
                    )
                )
                yield result

    def _request(self, messages: list[Message]) -> ChatRequest:
        d = self.decoding
        return ChatRequest(
            model=self.model,
            messages=list(messages),
            tools=self.toolbox.specs() or None,
            temperature=d.temperature,
            top_p=d.top_p,
            top_k=d.top_k,
            max_tokens=d.max_tokens,
            seed=d.seed,
        )

    def _out_of_time(self, start: float) -> bool:
        budget = self.limits.time_budget_s
        return budget is not None and time.monotonic() - start > budget

    def _dispatch(self, call: ToolCall, ctx: RunContext) -> Generator[Event, None, ToolResultEvent]:
        """Validate, settle the gate (asking a person if it says so), then run with a timeout."""
        args, problem = check_call(call, self.toolbox)
        if problem is not None or args is None:
            return ToolResultEvent(call.id, call.function.name, problem or "", False, 0.0)
        tool = self.toolbox.get(call.function.name)
        if tool is None:  # check_call found it; a toolbox changed under a run is a bug
            raise RuntimeError(f"tool {call.function.name!r} vanished from the toolbox")
        verdict: Verdict | None = None
        if isinstance(tool, GatedTool):
            try:
                gate = tool.gate(args, ctx)
            except ToolError as exc:
                return ToolResultEvent(call.id, tool.name, f"error: {exc.message}", False, 0.0)
            verdict = yield from self._settle(call, gate, ctx)
        began = time.monotonic()
        ok = True
        try:
            if verdict is not None and not verdict.approved:
                content = _gated(tool, args, ctx, verdict)()  # records and raises the refusal
            else:
                content = self._run_tool(_gated(tool, args, ctx, verdict), ctx)
        except ToolError as exc:
            ok, content = False, f"error: {exc.message}"
        except FutureTimeout:
            ok, content = (
                False,
                (
                    f"error: {call.function.name} did not finish within "
                    f"{self.limits.tool_timeout_s:g} s and was abandoned"
                ),
            )
        except _Cancelled:
            ok, content = False, f"error: {call.function.name} was stopped by the user"
        except Exception as exc:  # a tool's own crash is an observation, not the loop's crash
            ok, content = False, f"error: {call.function.name} failed: {type(exc).__name__}: {exc}"
        content = _truncate(content, self.limits.max_observation_chars)
        return ToolResultEvent(call.id, call.function.name, content, ok, time.monotonic() - began)

    def _settle(
        self, call: ToolCall, gate: Gate, ctx: RunContext
    ) -> Generator[Event, None, Verdict]:
        if gate.action == "allow":
            return Verdict("allow", gate.reason, gate)
        if gate.action == "deny":
            return Verdict("deny", gate.reason, gate)
        pending = ctx.approvals.open()
        yield ApprovalRequested(
            pending.id,
            call,
            gate.rule,
            gate.reason,
            gate.suggestion,
            gate.summary,
            ctx.ask_timeout_s,
            ctx.run_id,
        )
        try:
            outcome, by = pending.wait(ctx.ask_timeout_s, ctx.cancel)
        finally:
            ctx.approvals.close(pending.id)
        yield ApprovalResolved(pending.id, outcome, by, ctx.run_id)
        return Verdict(outcome, by, gate)

    def _run_tool(self, fn: Callable[[], str], ctx: RunContext) -> str:
        """Run on the run's own threads; the timeout starts now, after any approval.

        A call that times out or is cancelled before it started is cancelled for good; one
        already running is abandoned (its sandbox's own limits still end it).
        """
        future: Future[str] = ctx.executor.submit(contextvars.copy_context().run, fn)
        deadline = time.monotonic() + self.limits.tool_timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                future.cancel()
                raise FutureTimeout
            try:
                return future.result(timeout=min(0.05, remaining))
            except FutureTimeout:
                if ctx.cancel.is_set():
                    future.cancel()
                    raise _Cancelled from None


class _Cancelled(Exception):
    """The run was stopped while a tool was running."""


def _gated(
    tool: Tool, args: dict[str, Any], ctx: RunContext, verdict: Verdict | None
) -> Callable[[], str]:
    if verdict is not None and isinstance(tool, GatedTool):
        gated = tool
        return lambda: gated.call_gated(args, ctx, verdict)
    return lambda: tool.call(args)


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = text[: limit // 2]
    tail = text[-limit // 2 :]
    cut = len(text) - len(head) - len(tail)
    return f"{head}\n[... {cut} characters cut ...]\n{tail}"


__all__ = ["AgentLoop", "AssistantMessage", "Decoding", "LoopLimits"]
