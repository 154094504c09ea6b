"""The agent loop: request, generate, dispatch tool calls, append observations, repeat."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

from agent.backend import Backend, Completion, TextDelta
from agent.errors import ToolError, UserError
from agent.events import (
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
from agent.session import Session
from agent.tools import Toolbox, observation
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

    def run(self, session: Session, task: str) -> Iterator[Event]:
        """Add ``task`` as a user message to ``session`` and work on it until a final answer."""
        if self.system_prompt and not any(m.role == "system" for m in session.messages):
            session.append(SystemMessage(content=self.system_prompt))
        session.append(UserMessage(content=task))
        start = time.monotonic()
        usage = UsageEvent(0, 0, 0, 0, 0.0)
        try:
            yield from self._steps(session, start, usage)
        finally:
            usage.seconds = time.monotonic() - start
            yield usage

    def _steps(self, session: Session, start: float, usage: UsageEvent) -> Iterator[Event]:
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
            if self.cancel.is_set():
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
                    if self.cancel.is_set():
                        break
            except UserError as exc:
                yield ErrorEvent(exc.message, "backend")
                return
            if completion is None:
                yield ErrorEvent(
                    "stopped by the user"
                    if self.cancel.is_set()
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
                result = self._dispatch(call)
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

    def _dispatch(self, call: ToolCall) -> ToolResultEvent:
        began = time.monotonic()
        args, problem = check_call(call, self.toolbox)
        if problem is not None or args is None:
            return ToolResultEvent(call.id, call.function.name, problem or "", False, 0.0)
        tool = self.toolbox.get(call.function.name)
        assert tool is not None  # check_call found it
        ok = True
        try:
            ok, content = _call_with_timeout(
                lambda: observation(tool.call(args)), self.limits.tool_timeout_s
            )
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
        except Exception as exc:  # a tool's own crash is an observation, not the loop's crash
            ok, content = False, f"error: {call.function.name} failed: {type(exc).__name__}: {exc}"
        content = _truncate(content, self.limits.max_observation_chars)
        return ToolResultEvent(call.id, call.function.name, content, ok, time.monotonic() - began)


_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="clawloop-tool")


def _call_with_timeout(fn: Callable[[], tuple[bool, str]], timeout: float) -> tuple[bool, str]:
    return _POOL.submit(fn).result(timeout=timeout)


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = text[: limit // 2]
    tail = text[-limit // 2 :]
    cut = len(text) - len(head) - len(tail)
    return f"{head}\n[... {cut} characters cut ...]\n{tail}"


__all__ = ["AgentLoop", "AssistantMessage", "Decoding", "LoopLimits"]
