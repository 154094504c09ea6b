"""The data-flow gate: consequential calls whose arguments came from untrusted content ask.

Beside the permission rules (sandbox/policy.py), which say whether a tool may run at all, this
layer says whether *this* call may run *now*, given what the conversation holds. Once untrusted
content (a mail, a web page, an MCP result, a third-party skill's output) is in the
conversation, each checked argument of a consequential call must come from the user's own
words or a trusted result (agent/dataflow.py). If one does not, or the gate cannot tell, the
call asks the owner, showing the argument and where it came from; a run nobody attends
refuses it. Tripwires come first and hold whatever the configuration says: an outbound call
that carries a known secret or a planted canary token is refused and reported.

Consequential calls are named by the rule names of the permission rules (``mail.send``,
``files.write``, ``mcp.*``), each with the arguments to check and how (``user``, ``trusted``
or ``words``, see agent/dataflow.py). The defaults are :data:`DEFAULT_CONSEQUENTIAL`;
``[sandbox.dataflow]`` adds to them or replaces an entry, and a skill's manifest names its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent.dataflow import Evidence, Finding, Need, values
from agent.messages import Message
from sandbox.rules import RuleTarget, tool_matches

Checks = dict[str, Need]

# What the defaults guard against: mail sent to a stranger's address; the user's files deleted
# or overwritten at a stranger's word; a command line or an MCP call carrying a stranger's
# words. A mail's body is not checked: a summary of a mail sent where the user said is the
# user's task; where it goes is what matters (and the tripwires watch what it carries).
DEFAULT_CONSEQUENTIAL: dict[str, Checks] = {
    "mail.send": {"to": "trusted", "cc": "trusted"},
    "files.write": {"path": "user", "to": "user"},
    "files.edit": {"path": "user"},
    "shell": {"command": "words"},
    "run_script": {"path": "user"},
    "skills.run": {"*": "words"},
    "mcp.*": {"*": "words"},
}
# Calls whose arguments leave the machine: the tripwires look at these.
DEFAULT_OUTBOUND = ["mail.send", "mcp.*", "shell", "skills.run"]


class FlowSettings(BaseModel):
    """``[sandbox.dataflow]``: the data-flow gate and the tripwires."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        default=True, description="check consequential calls once untrusted content is read"
    )
    consequential: dict[str, Checks] = Field(
        default_factory=dict,
        description='more consequential calls, or new checks for one: {"mail.send" = {to = '
        '"user"}}; an empty table ({}) makes a call not consequential',
    )
    outbound: list[str] = Field(
        default_factory=list, description="more calls whose arguments leave the machine"
    )
    untrusted_paths: list[str] = Field(
        default_factory=lambda: ["downloads/**", "Downloads/**"],
        description="workspace files whose text is untrusted, like a mail (globs)",
    )
    canaries: list[str] = Field(
        default_factory=list,
        description="tokens planted in private files; an outbound call carrying one is refused",
    )
    untrusted_results: Literal["shown", "reference"] = Field(
        default="shown",
        description='how untrusted results reach the model: "shown" (fenced and labelled) or '
        '"reference" (a note only; ask_about reads them)',
    )


@dataclass(slots=True, frozen=True)
class FlowVerdict:
    """What the gate says about one call: ask the owner, or refuse (a tripwire)."""

    action: Literal["ask", "deny"]
    reason: str
    findings: tuple[Finding, ...] = ()


@dataclass(slots=True)
class FlowPolicy:
    """The consequential calls in force and the tokens the tripwires look for."""

    settings: FlowSettings = field(default_factory=FlowSettings)
    checks: dict[str, Checks] = field(default_factory=dict)
    outbound: list[str] = field(default_factory=list)

    @classmethod
    def from_settings(cls, settings: FlowSettings) -> FlowPolicy:
        checks = {**DEFAULT_CONSEQUENTIAL, **settings.consequential}
        return cls(settings, checks, [*DEFAULT_OUTBOUND, *settings.outbound])

    def add(self, name: str, checks: Checks, outbound: bool = False) -> None:
        """A skill's own consequential tool; the user's configuration still wins."""
        if name not in self.settings.consequential:
            self.checks.setdefault(name, checks)
        if outbound and name not in self.outbound:
            self.outbound.append(name)

    def checks_for(self, target: RuleTarget, tool_name: str) -> Checks | None:
        """The arguments to check for this tool, or None: an entry naming it exactly wins, then
        the longest glob (``mcp.notes.*`` before ``mcp.*``)."""
        found = [p for p in self.checks if tool_matches(p, target, tool_name)]
        if not found:
            return None
        best = max(found, key=lambda p: (p in (target.name, tool_name), len(p)))
        return self.checks[best]

    def is_outbound(self, target: RuleTarget, tool_name: str) -> bool:
        return any(tool_matches(p, target, tool_name) for p in self.outbound)

    def check(
        self,
        target: RuleTarget,
        tool_name: str,
        arguments: Mapping[str, Any],
        messages: Iterable[Message],
        is_secret: Callable[[str], bool],
    ) -> FlowVerdict | None:
        """None if the call may go on as the permission rules say; else ask or refuse."""
        if self.is_outbound(target, tool_name):
            tripped = self._tripwire(arguments, is_secret)
            if tripped is not None:
                return FlowVerdict("deny", tripped)
        checks = self.checks_for(target, tool_name)
        if not self.settings.enabled or not checks:
            return None
        evidence = Evidence.of(messages)
        if not evidence.tainted:
            return None
        findings = tuple(
            finding
            for name, need in checks.items()
            for argument, text in values(dict(arguments), name)
            if (finding := evidence.check(argument, text, need)) is not None
        )
        if not findings:
            return None
        return FlowVerdict(
            "ask", "data flow: " + "; ".join(f.explain() for f in findings), findings
        )

    def _tripwire(
        self, arguments: Mapping[str, Any], is_secret: Callable[[str], bool]
    ) -> str | None:
        canaries = [c.lower() for c in self.settings.canaries if c.strip()]
        for argument, text in values(dict(arguments), "*"):
            if is_secret(text):
                return f"tripwire: the {argument} carries a known secret"
            lowered = text.lower()
            for canary in canaries:
                if canary in lowered:
                    return f"tripwire: the {argument} carries the canary token {canary!r}"
        return None


def untrusted_path(relative: str, globs: Iterable[str]) -> bool:
    """Whether a workspace file's text is untrusted (it lies under one of ``globs``)."""
    return any(fnmatchcase(relative, g) or fnmatchcase(relative, g.rstrip("*/")) for g in globs)
