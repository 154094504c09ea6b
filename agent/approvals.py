"""Approvals as data: a tool's gate, the question asked of a person, and the answer awaited.

When a guarded tool's gate says "ask" during a run, the tool asks through its run's context
(:meth:`agent.run_context.RunContext.ask`): an :class:`~agent.events.ApprovalRequested` event
goes to the front end and the call waits on the run's :class:`ApprovalBroker` until someone
answers it (the terminal, a chat's ``/approve ID``), the ask expires, or the run is cancelled.
Expired and cancelled asks are refusals: the call never runs. The loop only passes the events on.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass
from typing import Any, Literal

Answer = Literal["once", "always", "deny"]
Outcome = Literal["once", "always", "deny", "expired", "cancelled", "allow"]


@dataclass(slots=True, frozen=True)
class Gate:
    """What a tool's policy says before a call: allow, ask a person, or deny."""

    action: Literal["allow", "ask", "deny"]
    reason: str  # "rule `shell(ls *)`", "default: no rule allows this"
    rule: str = ""  # the text of the rule that matched, if one did
    suggestion: str = ""  # the allow rule an "always" answer saves
    summary: str = ""  # the call as one line, secrets redacted
    detail: Any = None  # the policy's own decision, handed back to the tool
    # Only a person may answer: no standing answer (``--yes``) and no "always" rule.
    person_only: bool = False


@dataclass(slots=True, frozen=True)
class Verdict:
    """How a gated call was settled, and by whom."""

    outcome: Outcome
    by: str
    gate: Gate

    @property
    def approved(self) -> bool:
        return self.outcome in ("once", "always", "allow")


def new_approval_id() -> str:
    """A short id a person can type: ``/approve 3f9a1c``."""
    return secrets.token_hex(3)


class PendingApproval:
    """One open question; answered at most once."""

    def __init__(self, approval_id: str) -> None:
        self.id = approval_id
        self._done = threading.Event()
        self._answer: Outcome = "expired"
        self._by = ""

    def settle(self, answer: Outcome, by: str) -> bool:
        """Record the answer; False if it was already answered."""
        if self._done.is_set():
            return False
        self._answer, self._by = answer, by
        self._done.set()
        return True

    def wait(self, timeout_s: float, cancel: threading.Event) -> tuple[Outcome, str]:
        """Block until answered, cancelled or expired (checked every 50 ms for the cancel)."""
        remaining = timeout_s
        while remaining > 0 and not self._done.is_set():
            if cancel.is_set():
                self.settle("cancelled", "the run was stopped")
                break
            step = min(0.05, remaining)
            self._done.wait(step)
            remaining -= step
        self.settle("expired", f"no answer within {timeout_s:g} s")
        return self._answer, self._by


class ApprovalBroker:
    """The open approvals of one run, by id; any front end may answer them."""

    def __init__(self) -> None:
        self._open: dict[str, PendingApproval] = {}
        self._lock = threading.Lock()

    def open(self, approval_id: str | None = None) -> PendingApproval:
        """A new open question with a fresh id (or the one given)."""
        with self._lock:
            approval_id = approval_id or new_approval_id()
            while approval_id in self._open:
                approval_id = new_approval_id()
            pending = PendingApproval(approval_id)
            self._open[approval_id] = pending
            return pending

    def answer(self, approval_id: str, answer: Answer, by: str) -> bool:
        """Answer an open question; False if there is none with that id (or it was answered)."""
        with self._lock:
            pending = self._open.get(approval_id)
        return pending is not None and pending.settle(answer, by)

    def close(self, approval_id: str) -> None:
        """Forget a settled question."""
        with self._lock:
            self._open.pop(approval_id, None)

    def open_ids(self) -> list[str]:
        """Ids still waiting for an answer."""
        with self._lock:
            return list(self._open)

    def cancel_all(self) -> None:
        """The run is stopping: every open question is refused."""
        with self._lock:
            pending = list(self._open.values())
        for p in pending:
            p.settle("cancelled", "the run was stopped")
