"""The agent loop: request, generate, dispatch tool calls, append observations, repeat."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import Future, wait
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from agent.backend import Backend, Completion, TextDelta
from agent.by_reference import by_reference
from agent.compaction import Compactor
from agent.errors import ToolError, UserError
from agent.events import (
    ErrorEvent,
    Event,
    FinalEvent,
    StepEvent,
    TokenEvent,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
)
from agent.grounding import GROUNDING, guessed, refusal
from agent.messages import (
    AssistantMessage,
    ChatRequest,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from agent.progress import REPEAT_GUARD, GuardLimits, ProgressGuard, Stop
from agent.provenance import Provenance
from agent.run_context import CallInRun, RunContext, context_for_call, new_run_id
from agent.session import Session
from agent.tool_selection import ToolSelector
from agent.tools import Tool, Toolbox, ToolResult, observation
from agent.validation import check_call

# How long a running tool gets to end once its run is cancelled, before it is abandoned.
CANCEL_GRACE_S = 2.0


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
    prompt_label: str = "none"  # the prompt's id@version, as traces record it
    # A tool whose call is the final answer (its ``text`` argument). With one, every reply
    # must be a tool call, so a grammar-constrained small model always writes a valid call.
    answer_tool: str | None = None
    # Worked examples sent after the system prompt in every request (never saved in the session).
    examples: list[Message] = field(default_factory=list)
    # Chooses the worked examples for each request instead (agent/shots.py): given the
    # conversation and the names of the tools the model may be offered.
    pick_examples: Callable[[Sequence[Message], Iterable[str]], list[Message]] | None = None
    # Narrows the tools offered in each request (tool retrieval for small models).
    select_tools: ToolSelector | None = None
    # A call that repeats one already made in this run is not run again: the model is shown
    # the earlier result and, with an answer tool, offered only that tool next.
    repeat_guard: bool = False
    # With an answer tool: a call whose short values (names, places, numbers) appear nowhere in
    # the conversation is not run (agent/grounding.py); the model is offered only the answer
    # next, to reply or ask for what is missing.
    grounded_calls: bool = False
    # Stops a run that keeps making the same calls or hitting the same error (agent/progress).
    guards: GuardLimits | None = None
    limits: LoopLimits = field(default_factory=LoopLimits)
    decoding: Decoding = field(default_factory=Decoding)
    model: str | None = None
    # Replaces older turns by a summary when a request would pass its budget (None: never).
    compactor: Compactor | None = None
    # Untrusted results reach the model as notes, never as text (agent/by_reference.py);
    # ``reader_tool`` is the tool the notes point to.
    untrusted_by_reference: bool = False
    reader_tool: str | None = None
    # Rewrites the system prompt of every request (the memory as it is now, say); the session
    # keeps the prompt it stored.
    refresh_system: Callable[[str], str] | None = None
    cancel: threading.Event = field(default_factory=threading.Event)

    def run(
        self, session: Session, task: str, context: RunContext | None = None
    ) -> Iterator[Event]:
        """Add ``task`` as a user message to ``session`` and work on it until a final answer.

        ``context`` is the run's own state (id, cancel token, tool threads, open approvals);
        without one, the run gets a fresh context whose cancel token is ``self.cancel``. Every
        event carries the run's id and the step (model call) it belongs to.
        """
        owned = context is None
        ctx = context if context is not None else RunContext(cancel=self.cancel)
        run_id = ctx.run_id
        if self.system_prompt and not any(m.role == "system" for m in session.messages):
            session.append(SystemMessage(content=self.system_prompt))
        session.append(UserMessage(content=task, provenance=ctx.task_provenance))
        ctx.messages = session.messages
        start = time.monotonic()
        usage = UsageEvent(0, 0, 0, 0, 0.0)
        try:
            for event in self._steps(session, start, usage, ctx):
                event.run_id, event.step = run_id, usage.steps
                yield event
        finally:
            ctx.approvals.cancel_all()
            if owned:
                ctx.close()
            usage.seconds = time.monotonic() - start
            usage.run_id, usage.step = run_id, usage.steps
            yield usage

    def _steps(
        self, session: Session, start: float, usage: UsageEvent, ctx: RunContext
    ) -> Iterator[Event]:
        done: dict[str, ToolResultEvent] = {}  # call -> result, for the repeat guard
        last_shown: list[dict[str, Any]] | None = None  # the tools the previous step showed
        answer_only = False
        progress = ProgressGuard(self.guards) if self.guards is not None else None
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
            spent = ctx.budget.exceeded(usage) if ctx.budget is not None else None
            if spent is not None:
                yield ErrorEvent(spent, "budget")
                return
            usage.steps += 1
            completion: Completion | None = None
            began = time.monotonic()
            try:
                request = self._request(session.window(), answer_only)
                if self.compactor is not None:
                    compacted = self.compactor.check(session, request)
                    if compacted is not None:
                        yield compacted
                        request = self._request(session.window(), answer_only)
                    request, _cut = self.compactor.fit(request)
                answer_only = False
                for event in self.backend.generate(request):
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
            if self.compactor is not None:
                self.compactor.observe(request, completion.usage.prompt_tokens)
            usage.completion_tokens += completion.usage.completion_tokens
            usage.cached_tokens += completion.usage.cached_tokens
            message = completion.message
            step = _step_event(completion, len(session.messages), time.monotonic() - began)
            shown = [t.to_wire() for t in request.tools or []]
            if shown != last_shown:
                step.tools, last_shown = shown, shown
            yield step
            answer = self._answer_of(message)
            if answer is not None:
                message = AssistantMessage(content=answer)
            session.append(message)
            if completion.parse_error and not message.tool_calls:
                # The model tried to call a tool and the call could not be read: say how to
                # write it and let it try again, rather than taking the markup as an answer.
                session.append(UserMessage(content=completion.parse_error))
                continue
            if not message.tool_calls:
                if completion.finish_reason == "length":
                    yield ErrorEvent(
                        "the model stopped at its token limit before finishing its answer "
                        "(raise decoding.max_tokens, or ask for less)",
                        "length",
                    )
                    return
                yield FinalEvent(message.content or "")
                return
            stop: Stop | None = None
            for call in message.tool_calls:
                yield ToolCallEvent(call)
                key = f"{call.function.name} {call.function.arguments.strip()}"
                made_up = self._made_up(call, session.messages, request)
                if self.repeat_guard and key in done:
                    result = self._repeated(call, done[key])
                    answer_only = self.answer_tool is not None
                elif made_up is not None:
                    result, answer_only = made_up, True
                else:
                    result = yield from self._dispatch(call, ctx)
                    if result.ok:
                        done[key] = result
                if progress is not None:
                    result, found = progress.observe(call, result)
                    stop = stop or found
                session.append(
                    ToolMessage(
                        tool_call_id=call.id,
                        name=call.function.name,
                        content=result.content,
                        provenance=result.provenance,
                    )
                )
                yield result
            if stop is not None:  # after the whole batch: every call has its result
                yield ErrorEvent(stop.message, stop.reason)
                return

    def _answer_of(self, message: AssistantMessage) -> str | None:
        """The final answer if ``message`` calls the answer tool (and nothing else)."""
        calls = message.tool_calls or []
        if self.answer_tool is None or len(calls) != 1:
            return None
        if calls[0].function.name != self.answer_tool:
            return None
        try:
            args = calls[0].function.parsed_arguments()
        except ValueError:
            return None
        text = args.get("text") if isinstance(args, dict) else None
        return text if isinstance(text, str) else None

    def _repeated(self, call: ToolCall, earlier: ToolResultEvent) -> ToolResultEvent:
        """The observation for a call already made: its earlier result (and label), not a
        second run."""
        then = f"call {self.answer_tool}" if self.answer_tool else "answer"
        content = f"{earlier.content}\n(Already done; do not repeat it: {then}.)"
        return ToolResultEvent(
            call.id,
            call.function.name,
            content,
            False,
            0.0,
            decision="invalid",
            decided_by=REPEAT_GUARD,
            provenance=earlier.provenance,
        )

    def _made_up(
        self, call: ToolCall, messages: Sequence[Message], request: ChatRequest
    ) -> ToolResultEvent | None:
        """The refusal of a call built from values the conversation never gave, or None. The
        system prompt is the one ``request`` showed (with the memory as it is now)."""
        if not self.grounded_calls or self.answer_tool in (None, call.function.name):
            return None
        seen = list(messages)
        shown = request.messages[0] if request.messages else None
        if seen and isinstance(seen[0], SystemMessage) and isinstance(shown, SystemMessage):
            seen[0] = shown
        missing = guessed(call, self.toolbox.get(call.function.name), seen)
        if not missing:
            return None
        text = refusal(missing, self.answer_tool or "")
        return ToolResultEvent(
            call.id, call.function.name, text, False, decision="invalid", decided_by=GROUNDING
        )

    def examples_for(self, messages: Sequence[Message]) -> list[Message]:
        """The worked examples a request with ``messages`` shows: the fixed ones, or those
        chosen for its latest user message (the same for every request of a run)."""
        if self.pick_examples is None:
            return list(self.examples)
        return self.pick_examples(messages, [t.function.name for t in self.toolbox.specs()])

    def _request(self, messages: list[Message], answer_only: bool = False) -> ChatRequest:
        d = self.decoding
        required = self.answer_tool is not None and self.toolbox.get(self.answer_tool) is not None
        sent = (
            by_reference(messages, self.reader_tool)
            if self.untrusted_by_reference
            else list(messages)
        )
        if self.refresh_system is not None and sent and isinstance(sent[0], SystemMessage):
            sent[0] = SystemMessage(content=self.refresh_system(sent[0].content))
        shots = self.examples_for(messages)
        if shots:
            at = 1 if sent and sent[0].role == "system" else 0
            sent[at:at] = shots
        tools = self.toolbox.specs()
        allowed: list[str] | None = None
        if self.select_tools is not None and tools:
            tools, allowed = self.select_tools.choose(list(messages), tools)
        if answer_only and self.answer_tool is not None:
            # The same tools stay shown (the prompt keeps its prefix); only the answer is callable.
            if all(t.function.name != self.answer_tool for t in tools):
                tools = [
                    *tools,
                    *(t for t in self.toolbox.specs() if t.function.name == self.answer_tool),
                ]
            allowed = [self.answer_tool]
        return ChatRequest(
            model=self.model,
            messages=sent,
            tools=tools or None,
            allowed_tools=allowed,
            tool_choice="required" if required else None,
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
        """Validate, then run with a timeout; what a guarded tool asks a person passes through."""
        args, problem = check_call(call, self.toolbox)
        if problem is not None or args is None:
            return ToolResultEvent(
                call.id,
                call.function.name,
                problem or "",
                False,
                0.0,
                decision="invalid",
                decided_by="validation",
            )
        tool = self.toolbox.get(call.function.name)
        if tool is None:  # check_call found it; a toolbox changed under a run is a bug
            raise RuntimeError(f"tool {call.function.name!r} vanished from the toolbox")
        # An error's text may quote what the tool read: it is labelled as the tool's results are.
        label = declared_provenance(tool)
        running = CallInRun(call)
        try:
            result = yield from self._run_tool(lambda: tool.call(args), ctx, running)
            ok, content = observation(result)
            label = result.labelled(label)
        except ToolError as exc:  # a refusal too: the model reads why and changes course
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
        return ToolResultEvent(
            call.id,
            call.function.name,
            content,
            ok,
            time.monotonic() - running.started,
            decision=running.decision,
            decided_by=running.decided_by,
            provenance=label,
        )

    def _run_tool(
        self, fn: Callable[[], ToolResult], ctx: RunContext, running: CallInRun
    ) -> Generator[Event, None, ToolResult]:
        """Run on the run's own threads, passing on the events the call raises (an approval
        asked and answered); the timeout does not count the time a person takes to answer.

        A call that times out or is cancelled before it started is cancelled for good. One
        already running sees the run's cancel token through :func:`current_run` (the sandbox
        kills its command); it gets a moment to end, then it is abandoned (its sandbox's own
        limits still end it).
        """
        future: Future[ToolResult] = ctx.executor.submit(context_for_call(ctx, running).run, fn)
        while True:
            yield from _drain(ctx)
            remaining = running.started + self.limits.tool_timeout_s - time.monotonic()
            if remaining <= 0 and not running.asking:
                future.cancel()
                raise FutureTimeout
            step = 0.05 if running.asking else min(0.05, max(remaining, 0.01))
            done, _ = wait([future], timeout=step)
            if not done:
                if ctx.cancel.is_set():
                    if not future.cancel():
                        # Running: let it clean up (a killed command is gone before we say so).
                        wait([future], timeout=CANCEL_GRACE_S)
                    yield from _drain(ctx)
                    if future.done() and running.decision in _REFUSED:
                        future.result()  # the ask ended with the run: that refusal is the result
                    raise _Cancelled from None
                continue
            yield from _drain(ctx)
            if ctx.cancel.is_set() and running.decision not in _REFUSED:
                raise _Cancelled  # it ended because the run was stopped (a killed command)
            return future.result()


# How an ask ended when the call was refused (agent/approvals Outcome).
_REFUSED = ("deny", "expired", "cancelled")


def _drain(ctx: RunContext) -> Iterator[Event]:
    """The events a tool thread raised since the last look."""
    while True:
        try:
            yield ctx.events.get_nowait()
        except queue.Empty:
            return


def declared_provenance(tool: Tool) -> Provenance:
    """How ``tool`` labels its results when they say nothing themselves (its ``provenance``
    attribute; a tool that declares none is its own trusted source)."""
    declared = getattr(tool, "provenance", None)
    return declared if isinstance(declared, Provenance) else Provenance.tool(tool.name)


class _Cancelled(Exception):
    """The run was stopped while a tool was running."""


def _step_event(completion: Completion, messages: int, seconds: float) -> StepEvent:
    u = completion.usage
    ttft = completion.ttft_s
    decode_s = seconds - (ttft or 0.0)
    rate = u.completion_tokens / decode_s if decode_s > 0 and u.completion_tokens else None
    return StepEvent(
        messages=messages,
        prompt_tokens=u.prompt_tokens,
        cached_tokens=u.cached_tokens,
        completion_tokens=u.completion_tokens,
        finish_reason=completion.finish_reason,
        message=completion.message,
        raw_text=completion.raw_text,
        parse_error=completion.parse_error,
        ttft_s=ttft,
        tokens_per_s=rate,
        seconds=seconds,
    )


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = text[: limit // 2]
    tail = text[-limit // 2 :]
    cut = len(text) - len(head) - len(tail)
    return f"{head}\n[... {cut} characters cut ...]\n{tail}"


__all__ = ["AgentLoop", "AssistantMessage", "Decoding", "LoopLimits", "new_run_id"]
