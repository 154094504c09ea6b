"""Approvals: a wrapper that asks the policy, and a person when the policy says "ask".

Every tool the agent gets is wrapped in :class:`GuardedTool`, which gates, asks, runs, redacts
and audits on one path; a refusal is raised as :class:`ToolError`, so the model reads it as an
observation and can change course. The loop knows nothing of approvals: in a run, an "ask"
becomes an ``ApprovalRequested`` event through the run's context (any front end answers it),
and the call waits for the answer. Called outside a run (``agent tools call``), only the
tool's :class:`Approver` can answer.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent.approvals import Answer, Gate, Verdict
from agent.errors import ToolError
from agent.provenance import Provenance
from agent.run_context import CallInRun, RunContext, current_call, current_run
from agent.tools import Tool, ToolResult
from sandbox.audit import AuditEntry, AuditLog
from sandbox.flow import FlowVerdict
from sandbox.policy import Decision, Policy
from sandbox.rules import Effect, RuleTarget, Subject, parse_rule
from sandbox.secrets import Redactor

__all__ = ["Answer", "ApprovalRequest", "Approver", "GuardedTool", "refusal", "with_rule"]


@dataclass(slots=True, frozen=True)
class ApprovalRequest:
    """One call waiting for a person's answer."""

    tool: str
    rule_name: str
    arguments: dict[str, Any]  # already redacted
    reason: str  # why it is asked: "default: no rule allows this", "rule `...`"
    rule: str  # the allow rule that "always" would save

    def describe(self) -> str:
        """The call as one line, e.g. ``shell(command="git push")``."""
        args = ", ".join(
            f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in self.arguments.items()
        )
        return f"{self.tool}({args})"


class Approver(Protocol):
    """Whoever answers "ask" decisions: a terminal prompt, ``--yes``, or no one."""

    name: str

    def ask(self, request: ApprovalRequest) -> Answer:
        """Answer once, always (save an allow rule), or deny."""
        ...


@dataclass(slots=True)
class ToolWrapper:
    """Shows the model exactly what ``inner`` shows: its name, description, schema, source."""

    inner: Tool

    name: str = field(init=False)
    description: str = field(init=False)
    parameters: dict[str, Any] = field(init=False)
    source: str = field(init=False)
    # How results are labelled when they carry no provenance of their own (agent/provenance).
    provenance: Provenance | None = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.inner.name
        self.description = self.inner.description
        self.parameters = self.inner.parameters
        self.source = str(getattr(self.inner, "source", "builtin"))
        declared = getattr(self.inner, "provenance", None)
        self.provenance = declared if isinstance(declared, Provenance) else None

    def call(self, arguments: dict[str, Any]) -> ToolResult:
        return self.inner.call(arguments)


@dataclass(slots=True)
class RuledTool(ToolWrapper):
    """A tool together with the name and argument mapping permission rules use for it."""

    rule_target: RuleTarget
    label: Provenance | None = None

    def __post_init__(self) -> None:
        ToolWrapper.__post_init__(self)  # (slots: no zero-argument super())
        if self.label is not None:
            self.provenance = self.label


def with_rule(
    tool: Tool,
    name: str,
    effect: Effect = "other",
    subject: Subject | None = None,
    provenance: Provenance | None = None,
) -> RuledTool:
    """Declare how rules name ``tool``: ``with_rule(t, "mail.send", subject=ValueSubject("to"))``.

    ``effect`` picks the default when no rule matches: "read" and "write" are allowed (writes
    not in read-only mode), "exec" and "other" ask. ``provenance`` labels its results when
    they carry no label of their own (mail is untrusted: ``Provenance(kind="mail", ...)``).
    """
    return RuledTool(tool, RuleTarget(name, effect, subject), provenance)


def rule_target(tool: Tool) -> RuleTarget:
    """A tool's declared rule target; an undeclared tool is named as is and always asks."""
    declared = getattr(tool, "rule_target", None)
    return declared if isinstance(declared, RuleTarget) else RuleTarget(tool.name, "other")


@dataclass(slots=True)
class GuardedTool(ToolWrapper):
    """Runs ``inner`` only if the policy, a standing answer or a person says so; redacts and
    audits every call, run or refused. A refusal is a :class:`ToolError` the model reads.

    One path for every call. In a run (the loop's tool thread: :func:`current_run`) an "ask"
    goes to a person through the run's events, unless ``approver`` gives a standing answer
    (``--yes``); outside a run (``agent tools call``) only ``approver`` answers, and with none
    the call is refused. ``save_rule`` keeps an "always" for later runs (the config file).
    """

    policy: Policy
    approver: Approver | None
    audit: AuditLog
    redactor: Redactor
    save_rule: Callable[[str], object] | None = None
    # Calls made outside a run (``agent tools call``) get an overlay of their own.
    outside_run: RunContext = field(default_factory=RunContext, repr=False)
    # Overrides the inner tool's label: a third-party skill's results are its skill's.
    label: Provenance | None = None

    def __post_init__(self) -> None:
        ToolWrapper.__post_init__(self)
        if self.label is not None:
            self.provenance = self.label

    def call(self, arguments: dict[str, Any]) -> ToolResult:
        began = time.monotonic()
        run = current_run()
        context = run if run is not None else self.outside_run
        gate = self.gate(arguments, context)
        verdict = self._settle(
            gate, arguments, context, current_call() if run is not None else None
        )
        decision = gate.detail
        by = _decided_by(verdict)
        if verdict.approved:
            if verdict.outcome == "always":
                self._remember(gate.suggestion, context)
            return self._run(arguments, decision, by, time.monotonic())
        message = refusal(decision) if decision.action == "deny" else _refusal_for(verdict)
        self._record(arguments, decision, by, "refused", message, began)
        raise ToolError(message)

    def decide(self, arguments: dict[str, Any], context: RunContext | None = None) -> Decision:
        """What the policy (with the run's overlay) says about this call, without running."""
        policy = self.policy
        if context is not None and context.allowed:
            overlay = [parse_rule(text, "allow", "session") for text in context.allowed]
            policy = Policy(policy.workspace, policy.mode, overlay + policy.rules, policy.flow)
        return policy.decide(rule_target(self.inner), self.name, arguments)

    def flow_check(self, arguments: dict[str, Any], context: RunContext) -> FlowVerdict | None:
        """The data-flow gate and the tripwires on this call, given what the run has read."""
        return self.policy.flow.check(
            rule_target(self.inner), self.name, arguments, context.messages, self.redactor.finds
        )

    def gate(self, arguments: dict[str, Any], context: RunContext) -> Gate:
        """Allow, deny, or ask someone: the policy with the run's overlay, then the data flow.
        Its ``detail`` is the :class:`Decision` the audit records."""
        target = rule_target(self.inner)
        decision = self.decide(arguments, context)
        flow = self.flow_check(arguments, context)
        if flow is not None and decision.action != "deny":
            return self._flow_gate(flow, arguments, context)
        request = self._request(decision, target, arguments)
        rule = decision.rule.text if decision.rule is not None else ""
        return Gate(
            decision.action, decision.reason, rule, request.rule, request.describe(), decision
        )

    def _flow_gate(self, flow: FlowVerdict, arguments: dict[str, Any], context: RunContext) -> Gate:
        """A tripwire refuses; a data-flow finding asks a person, and only a person: a run
        nobody attends (``--yes``, a scheduled job, an eval, a call outside a run) refuses it,
        whatever its rules."""
        summary = self.describe(arguments)
        if flow.action == "deny":
            return Gate(
                "deny", flow.reason, summary=summary, detail=Decision("deny", None, flow.reason)
            )
        if not context.attended:
            reason = f"{flow.reason} (and no one attends this run to approve it)"
            return Gate("deny", reason, summary=summary, detail=Decision("deny", None, reason))
        decision = Decision("ask", None, flow.reason)
        return Gate("ask", flow.reason, summary=summary, detail=decision, person_only=True)

    def _settle(
        self,
        gate: Gate,
        arguments: dict[str, Any],
        context: RunContext,
        call: CallInRun | None,
    ) -> Verdict:
        """Who answers an ask: a standing answer, else a person through the run, else no one."""
        if gate.action != "ask":
            verdict = Verdict(gate.action, gate.reason, gate)
        elif self.approver is not None and not gate.person_only:
            request = self._request(gate.detail, rule_target(self.inner), arguments)
            verdict = Verdict(self.approver.ask(request), self.approver.name, gate)
        elif call is not None:
            verdict = Verdict(*context.ask(call, gate), gate)
        else:
            verdict = Verdict("deny", "no one to ask", gate)
        if call is not None:
            call.decision, call.decided_by = verdict.outcome, verdict.by
        return verdict

    def describe(self, arguments: dict[str, Any]) -> str:
        """The call as one line, secrets redacted."""
        return ApprovalRequest(
            self.name, "", self.redactor.redact_obj(arguments), "", ""
        ).describe()

    def _remember(self, rule: str, context: RunContext) -> None:
        if rule and rule not in context.allowed:
            context.allowed.append(rule)
        if rule and self.save_rule is not None:
            # The answer stands for this run even if the config file cannot be written.
            with contextlib.suppress(Exception):
                self.save_rule(rule)

    def _run(
        self, arguments: dict[str, Any], decision: Decision, decided_by: str, began: float
    ) -> ToolResult:
        try:
            result = self.inner.call(arguments)
        except ToolError as exc:
            message = self.redactor.redact(exc.message)
            self._record(arguments, decision, decided_by, "error", message, began)
            raise ToolError(message) from None
        except Exception as exc:
            # A crash is still an observation for the loop; its text may carry a credential.
            message = self.redactor.redact(f"{self.name} failed: {type(exc).__name__}: {exc}")
            self._record(arguments, decision, decided_by, "error", message, began)
            raise ToolError(message) from exc
        result = result.map_text(self.redactor.redact)
        outcome, detail = ("error", result.render()) if result.is_error else ("ok", "")
        self._record(arguments, decision, decided_by, outcome, detail, began)
        return result

    def _request(
        self, decision: Decision, target: RuleTarget, arguments: dict[str, Any]
    ) -> ApprovalRequest:
        suggestion = target.rule_for(arguments, self.policy.workspace)
        return ApprovalRequest(
            self.name, target.name, self.redactor.redact_obj(arguments), decision.reason, suggestion
        )

    def _record(
        self,
        arguments: dict[str, Any],
        decision: Decision,
        decided_by: str,
        outcome: str,
        detail: str,
        began: float,
    ) -> None:
        self.audit.record(
            AuditEntry(
                tool=self.name,
                arguments=arguments,
                decision=decision.action,
                decided_by=decided_by,
                outcome=outcome,
                detail=detail,
                seconds=round(time.monotonic() - began, 4),
            )
        )


def _decided_by(verdict: Verdict) -> str:
    """Who decided, as the audit says it: the rule, or who answered the ask and how."""
    if verdict.gate.action != "ask":
        return verdict.by
    if verdict.outcome == "always":
        return f"{verdict.by}: always ({verdict.gate.suggestion})"
    return f"{verdict.by}: {verdict.outcome}"


def refusal(decision: Decision) -> str:
    """The message the model reads when the policy denies a call."""
    if decision.rule is None:
        return (
            f"denied ({decision.reason}): this call is not allowed here. "
            "Do not repeat it; try another way or ask the user."
        )
    return (
        f"denied by rule `{decision.rule.text}`: this call is not allowed. "
        "Do not repeat it; try another way or ask the user."
    )


def _refusal_for(verdict: Verdict) -> str:
    """What the model reads when a person refused, or nobody answered, or the run stopped."""
    if verdict.outcome == "expired":
        return (
            f"this call was not run: it needed the user's approval and nobody answered "
            f"({verdict.by}). Do not repeat it now; tell the user what you wanted to do."
        )
    if verdict.outcome == "cancelled":
        return "this call was not run: the user stopped the task."
    return (
        f"the user declined this call ({verdict.by}). Do not repeat it; "
        "try another way or ask the user."
    )
