"""What one run carries from the front end down to its tools: id, cancel token, executor, asks.

A front end (the terminal, a chat connector) makes a :class:`RunContext` per run and passes it to
``AgentLoop.run()``; the loop hands it on to every tool that accepts it. Nothing in it is shared
between runs, so one chat's slow tool or open question never holds up another chat.

While a tool call runs, :func:`current_run` returns its run's context, so code far below the
tool (the sandbox's command runner) sees the cancel token without every layer passing it on;
:func:`current_call` returns the call itself. A tool that must ask a person (the approvals
wrapper, skills/guard.py) asks through :meth:`RunContext.ask`: the question and its answer are
events the loop hands on to the front end while the call waits.
"""

from __future__ import annotations

import contextvars
import queue
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from agent.approvals import ApprovalBroker, Gate, Outcome
from agent.budget import Budget
from agent.events import ApprovalRequested, ApprovalResolved, Event
from agent.messages import Message, ToolCall
from agent.provenance import Provenance

DEFAULT_ASK_TIMEOUT_S = 600.0


def new_run_id() -> str:
    """A short random id for one run."""
    return secrets.token_hex(6)


@dataclass(slots=True)
class CallInRun:
    """One tool call as the loop runs it: the call, when its clock started (again once a
    person answered), whether it waits for a person now, and how its approval was settled
    (``decision``, ``decided_by``: what the tool reports; None for a tool that is never asked)."""

    call: ToolCall
    started: float = field(default_factory=time.monotonic)
    asking: bool = False
    decision: str | None = None
    decided_by: str | None = None


@dataclass
class RunContext:
    """Per-run state: its id, its cancel token, its own tool threads, its open approvals.

    ``allowed`` is the run's policy overlay: allow rules the person said "always" to during this
    run. They apply to this run only (and are saved to the config file for later runs); the
    policy object other runs share is never changed.

    ``attended`` says whether a person can answer this run's asks. A run nobody watches (``--yes``,
    a scheduled job, an eval) is refused what only a person may approve: a consequential call
    whose arguments came from untrusted content. ``messages`` is the conversation the run works
    on, for the policies that judge a call by what led to it; the loop sets it.
    """

    run_id: str = field(default_factory=new_run_id)
    cancel: threading.Event = field(default_factory=threading.Event)
    ask_timeout_s: float = DEFAULT_ASK_TIMEOUT_S
    tool_workers: int = 2
    approvals: ApprovalBroker = field(default_factory=ApprovalBroker)
    allowed: list[str] = field(default_factory=list)
    attended: bool = False
    messages: list[Message] = field(default_factory=list)
    budget: Budget | None = None
    # Who the task's words come from, when not an owner (a chat member): the loop labels the
    # user message with it.
    task_provenance: Provenance | None = None
    # Events raised on a tool thread (an approval asked and answered), for the loop to yield.
    events: queue.SimpleQueue[Event] = field(default_factory=queue.SimpleQueue, repr=False)
    _executor: ThreadPoolExecutor | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def executor(self) -> ThreadPoolExecutor:
        """This run's tool threads, started on first use."""
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=self.tool_workers, thread_name_prefix=f"tool-{self.run_id}"
                )
            return self._executor

    def ask(self, call: CallInRun, gate: Gate) -> tuple[Outcome, str]:
        """Ask a person about ``call`` and wait: ``ApprovalRequested`` goes out through
        :attr:`events`, any front end answers through :attr:`approvals`; the ask expires after
        ``ask_timeout_s`` and ends when the run is cancelled. The call's clock stops meanwhile."""
        pending = self.approvals.open()
        call.asking = True
        self.events.put(
            ApprovalRequested(
                pending.id,
                call.call,
                gate.rule,
                gate.reason,
                gate.suggestion,
                gate.summary,
                self.ask_timeout_s,
                gate.person_only,
                run_id=self.run_id,
            )
        )
        try:
            outcome, by = pending.wait(self.ask_timeout_s, self.cancel)
        finally:
            self.approvals.close(pending.id)
            call.started, call.asking = time.monotonic(), False
        self.events.put(ApprovalResolved(pending.id, outcome, by, run_id=self.run_id))
        return outcome, by

    def stop(self) -> None:
        """Cancel the run: running tools see the token, open approvals are answered "deny"."""
        self.cancel.set()
        self.approvals.cancel_all()

    def close(self) -> None:
        """Release the tool threads; calls not yet started are cancelled, never run later."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


_CURRENT: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar(
    "clawloop_run", default=None
)


_CALL: contextvars.ContextVar[CallInRun | None] = contextvars.ContextVar(
    "clawloop_call", default=None
)


def current_run() -> RunContext | None:
    """The run whose tool call is executing on this thread, if any."""
    return _CURRENT.get()


def current_call() -> CallInRun | None:
    """The loop's tool call executing on this thread, if any (None outside a run's loop)."""
    return _CALL.get()


def context_for_call(run: RunContext, call: CallInRun | None = None) -> contextvars.Context:
    """A copy of the caller's context variables in which :func:`current_run` is ``run`` and
    :func:`current_call` is ``call``."""
    copied = contextvars.copy_context()
    copied.run(_CURRENT.set, run)
    copied.run(_CALL.set, call)
    return copied
