"""Deciding a tool call: deny rules, then ask, then allow (first match wins), then defaults.

The rules in force are the user's (``[sandbox]`` in the config) and then each skill's own
default rules, merged kind by kind; the policy itself knows no tool.

Rules are a convenience that saves questions and catches the obvious; the OS sandbox
(sandbox/bwrap.py) is the boundary. A command-text rule cannot know what a script will do.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sandbox.flow import FlowPolicy
from sandbox.rules import Kind, Rule, RuleTarget, parse_rule, tool_matches
from sandbox.settings import FlowSettings, SandboxSettings

Action = Literal["allow", "ask", "deny"]


@dataclass(slots=True, frozen=True)
class Decision:
    """What the policy says about one call, and who said it."""

    action: Action
    rule: Rule | None
    reason: str  # for people and the audit log: "rule `shell(rm *)`", "default for reads"


@dataclass(slots=True)
class Policy:
    """The rules in force for one run."""

    workspace: Path
    mode: str = "workspace-write"
    rules: list[Rule] = field(default_factory=list)
    # Beside the rules: which calls are consequential, checked against what the run has read.
    flow: FlowPolicy = field(default_factory=lambda: FlowPolicy.from_settings(FlowSettings()))

    @classmethod
    def from_settings(
        cls,
        settings: SandboxSettings,
        workspace: Path,
        defaults: Iterable[tuple[Kind, str, str]] = (),
    ) -> Policy:
        """User rules from ``[sandbox]`` first, then ``defaults``: ``(kind, rule, source)``."""
        policy = cls(workspace, settings.mode, flow=FlowPolicy.from_settings(settings.dataflow))
        for kind, user in (
            ("deny", settings.deny),
            ("ask", settings.ask),
            ("allow", settings.allow),
        ):
            policy.rules += [parse_rule(text, kind, "config") for text in user]  # type: ignore[arg-type]
        policy.merge_defaults(defaults)
        return policy

    def merge_defaults(self, defaults: Iterable[tuple[Kind, str, str]]) -> None:
        """Append a skill's default rules; the user's rules, earlier in the list, still win."""
        for kind, text, source in defaults:
            rule = parse_rule(text, kind, source)
            if not any(r.kind == kind and r.text == rule.text for r in self.rules):
                self.rules.append(rule)

    def add(self, kind: Kind, text: str, source: str = "session") -> Rule:
        """Add a rule for the rest of this run (the user said "always")."""
        rule = parse_rule(text, kind, source)
        self.rules.insert(0, rule)
        return rule

    def decide(self, target: RuleTarget, tool_name: str, arguments: dict[str, Any]) -> Decision:
        """Deny, then ask, then allow; the first matching rule of each list wins."""
        if self.mode == "read-only" and target.effect == "write":
            return Decision("deny", None, "the sandbox is in read-only mode")
        for kind in ("deny", "ask", "allow"):
            for rule in self.rules:
                if rule.kind == kind and self._matches(rule, target, tool_name, arguments):
                    return Decision(rule.kind, rule, f"rule `{rule.text}`")
        return self._fallback(target)

    def _matches(
        self, rule: Rule, target: RuleTarget, tool_name: str, arguments: dict[str, Any]
    ) -> bool:
        if not tool_matches(rule.tool, target, tool_name):
            return False
        if rule.pattern is None:
            return True
        if target.subject is None:
            return False
        return target.subject.matches(rule.pattern, arguments, rule.kind, self.workspace)

    @staticmethod
    def _fallback(target: RuleTarget) -> Decision:
        if target.effect == "read":
            return Decision("allow", None, "default: reads inside the workspace are allowed")
        if target.effect == "write":
            return Decision("allow", None, "default: writes inside the workspace are allowed")
        return Decision("ask", None, "default: no rule allows this")
