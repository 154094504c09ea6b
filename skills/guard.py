"""Approvals: a wrapper that asks the policy, and the user when the policy says "ask".

Every tool the agent gets is wrapped in :class:`GuardedTool`; a refusal is raised as
:class:`ToolError`, so the model reads it as an observation and can change course.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agent.errors import ToolError
from agent.tools import Tool, ToolResult
from sandbox.audit import AuditEntry, AuditLog
from sandbox.policy import Decision, Policy
from sandbox.rules import Effect, RuleTarget, Subject
from sandbox.secrets import Redactor

Answer = Literal["once", "always", "deny"]


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

    def __post_init__(self) -> None:
        self.name = self.inner.name
        self.description = self.inner.description
        self.parameters = self.inner.parameters
        self.source = str(getattr(self.inner, "source", "builtin"))

    def call(self, arguments: dict[str, Any]) -> ToolResult:
        return self.inner.call(arguments)


@dataclass(slots=True)
class RuledTool(ToolWrapper):
    """A tool together with the name and argument mapping permission rules use for it."""

    rule_target: RuleTarget


def with_rule(
    tool: Tool, name: str, effect: Effect = "other", subject: Subject | None = None
) -> RuledTool:
    """Declare how rules name ``tool``: ``with_rule(t, "mail.send", subject=ValueSubject("to"))``.

    ``effect`` picks the default when no rule matches: "read" and "write" are allowed (writes
    not in read-only mode), "exec" and "other" ask.
    """
    return RuledTool(tool, RuleTarget(name, effect, subject))


def rule_target(tool: Tool) -> RuleTarget:
    """A tool's declared rule target; an undeclared tool is named as is and always asks."""
    declared = getattr(tool, "rule_target", None)
    return declared if isinstance(declared, RuleTarget) else RuleTarget(tool.name, "other")


@dataclass(slots=True)
class GuardedTool(ToolWrapper):
    """Runs ``inner`` only if the policy (or the approver) says so; redacts and audits."""

    policy: Policy
    approver: Approver
    audit: AuditLog
    redactor: Redactor

    def call(self, arguments: dict[str, Any]) -> ToolResult:
        began = time.monotonic()
        target = rule_target(self.inner)
        decision = self.policy.decide(target, self.name, arguments)
        decided_by = self._approve(decision, target, arguments, began)
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

    def decide(self, arguments: dict[str, Any]) -> Decision:
        """What the policy says about this call, without running or asking."""
        return self.policy.decide(rule_target(self.inner), self.name, arguments)

    def _approve(
        self, decision: Decision, target: RuleTarget, arguments: dict[str, Any], began: float
    ) -> str:
        if decision.action == "deny":
            message = refusal(decision)
            self._record(arguments, decision, decision.reason, "refused", message, began)
            raise ToolError(message)
        if decision.action == "allow":
            return decision.reason
        suggestion = target.rule_for(arguments, self.policy.workspace)
        request = ApprovalRequest(
            self.name, target.name, self.redactor.redact_obj(arguments), decision.reason, suggestion
        )
        answer = self.approver.ask(request)
        if answer == "always":
            self.policy.add("allow", suggestion)
            return f"{self.approver.name}: always ({suggestion})"
        if answer == "once":
            return f"{self.approver.name}: once"
        message = (
            f"the user declined this call ({self.approver.name}). Do not repeat it; "
            "try another way or ask the user."
        )
        self._record(arguments, decision, f"{self.approver.name}: deny", "refused", message, began)
        raise ToolError(message)

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
