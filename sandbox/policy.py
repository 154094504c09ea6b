"""Deciding a tool call: deny rules, then ask, then allow (first match wins), then defaults.

Rules are a convenience that saves questions and catches the obvious; the OS sandbox
(sandbox/bwrap.py) is the boundary. A command-text rule cannot know what a script will do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sandbox.rules import Kind, Rule, RuleTarget, parse_rule, tool_matches
from sandbox.settings import SandboxSettings

Action = Literal["allow", "ask", "deny"]

# Read-only commands that run without asking. Options that make them write or run other
# programs are sent back to "ask" by DEFAULT_ASK, which is checked first.
DEFAULT_ALLOW = [
    "shell(ls *)",
    "shell(cat *)",
    "shell(head *)",
    "shell(tail *)",
    "shell(wc *)",
    "shell(grep *)",
    "shell(rg *)",
    "shell(pwd)",
    "shell(echo *)",
    "shell(find *)",
    "shell(tree *)",
    "shell(file *)",
    "shell(stat *)",
    "shell(du *)",
    "shell(diff *)",
    "shell(which *)",
    "shell(git status*)",
    "shell(git diff*)",
    "shell(git log*)",
    "shell(git show*)",
    "shell(git branch)",
    "shell(git rev-parse*)",
    "files.read",
    "files.list",
    "files.search",
]

DEFAULT_ASK = [
    "shell(find * -exec *)",
    "shell(find * -execdir *)",
    "shell(find * -ok *)",
    "shell(find * -okdir *)",
    "shell(find * -delete *)",
    "shell(find * -fprint* *)",
    "shell(find * -fls *)",
    "shell(git * --output* *)",
    "shell(* --ext-diff *)",
    "shell(tail * -f *)",
    "shell(tail * --follow* *)",
    # Secrets in the workspace: reading them is the user's call.
    "files.read(**/.env)",
    "files.read(**/.env.*)",
    "files.read(**/*.pem)",
    "files.read(**/id_rsa*)",
    "files.read(**/id_ed25519*)",
]

DEFAULT_DENY = [
    # Deleting the root or the home folder.
    "shell(rm * / *)",
    "shell(rm * /[*] *)",
    "shell(rm * ~ *)",
    "shell(rm * ~/ *)",
    "shell(rm * ~/[*] *)",
    "shell(rm * $HOME *)",
    "shell(rm * $HOME/ *)",
    "shell(rm * $HOME/[*] *)",
    "shell(rm * --no-preserve-root *)",
    # Running whatever a download says.
    "shell(* | sh *)",
    "shell(* | bash *)",
    "shell(* | zsh *)",
    "shell(* | dash *)",
    "shell(* | sudo *)",
    "shell(* | python* -)",
    "shell(sh -c *curl*)",
    "shell(bash -c *curl*)",
    # Privilege and disk-level damage.
    "shell(sudo *)",
    "shell(su *)",
    "shell(mkfs*)",
    "shell(dd * of=/dev/*)",
    "shell(chmod * -R * / *)",
    "shell(chown * -R * / *)",
]


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

    @classmethod
    def from_settings(cls, settings: SandboxSettings, workspace: Path) -> Policy:
        """User rules from ``[sandbox]`` first, then the built-in defaults."""
        rules: list[Rule] = []
        for kind, user, default in (
            ("deny", settings.deny, DEFAULT_DENY),
            ("ask", settings.ask, DEFAULT_ASK),
            ("allow", settings.allow, DEFAULT_ALLOW),
        ):
            rules += [parse_rule(text, kind, "config") for text in user]  # type: ignore[arg-type]
            rules += [parse_rule(text, kind, "default") for text in default]  # type: ignore[arg-type]
        return cls(workspace, settings.mode, rules)

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
