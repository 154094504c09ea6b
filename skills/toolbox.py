"""Building the agent's toolbox from the registry: start skills, merge their rules, guard tools.

A skill runs only if it is built in, configured (an MCP server in the config file), or approved
in the lock file as it is now. Each skill that is not built in starts with a context held to its
manifest. Two tools with one name are a :class:`UserError` naming both skills.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pluggy

from agent.errors import UserError
from agent.provenance import Provenance
from agent.tools import Refine, Tool, Toolbox
from skills.context import SkillContext
from skills.default_rules import as_policy_rules
from skills.guard import Approver, GuardedTool, rule_target
from skills.library import catalog_text, make_library_tools
from skills.lock import LockFile
from skills.permissions import scoped_context
from skills.registry import discover
from skills.skill import Skill
from skills.workspace_enums import workspace_enums


def skills_dir(context: SkillContext) -> Path | None:
    """The user's skills folder: ``skills`` in the data folder (or the configured one)."""
    explicit = context.options.get("skills_dir")
    if explicit is not None:
        return Path(explicit)
    return context.data_dir / "skills" if context.data_dir is not None else None


def lock_file(context: SkillContext) -> LockFile | None:
    """The lock file, or None where there is no data folder (then only built-ins run)."""
    return LockFile(context.data_dir / "skills.lock.json") if context.data_dir else None


def status_of(skill: Skill, lock: LockFile | None) -> str:
    """builtin, configured, approved, new or changed."""
    if skill.trusted:
        return "builtin"
    if skill.metadata.get("configured"):
        return "configured"
    return lock.status(skill) if lock is not None else "new"


@dataclass
class SkillSet:
    """The enabled skills, started, with their tools; rebuilt in place on a reload."""

    context: SkillContext
    enabled: list[str] | None = None
    pm: pluggy.PluginManager | None = None
    skills: dict[str, Skill] = field(default_factory=dict)
    disabled: dict[str, str] = field(default_factory=dict)  # name -> why
    tools: list[tuple[Tool, Skill]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def load(self) -> None:
        """Discover, start and collect; skills that were running are closed first."""
        with self._lock:
            lock = lock_file(self.context)
            # A skill file runs only if the lock approves the very bytes that are imported.
            mcp = self.context.options.get("mcp")
            discovery = discover(skills_dir(self.context), mcp, self.pm, lock, verify=True)
            found = discovery.skills
            names = (
                [n for n, s in found.items() if s.by_default]
                if self.enabled is None
                else list(self.enabled)
            )
            held = {
                n: why for n, why in discovery.held.items() if self.enabled is None or n in names
            }
            unknown = [n for n in names if n not in found and n != "skills" and n not in held]
            if unknown:
                raise UserError(
                    f"unknown skill {', '.join(map(repr, unknown))}; "
                    f"known skills: {', '.join(sorted(found))}"
                )
            chosen: dict[str, Skill] = {}
            disabled: dict[str, str] = dict(held)
            for name in names:
                if name not in found:
                    continue
                status = status_of(found[name], lock)
                if status in ("new", "changed"):
                    disabled[name] = status
                else:
                    chosen[name] = found[name]
            # Start the new set before closing the old one: if it fails, what ran stays.
            tools = self._start(chosen)
            self.close()
            self.skills, self.disabled, self.tools = chosen, disabled, tools

    def _start(self, skills: dict[str, Skill]) -> list[tuple[Tool, Skill]]:
        tools: list[tuple[Tool, Skill]] = []
        owner: dict[str, Skill] = {}
        started: list[Skill] = []
        try:
            for skill in skills.values():
                context = self.context
                if skill.permissions is not None:
                    context = scoped_context(context, skill.name, skill.permissions)
                made = skill.start(context)
                started.append(skill)
                self.context.policy.merge_defaults(as_policy_rules(skill.name, skill.rules))
                _declare_consequences(self.context, skill, made)
                tools += [(_sourced(t, skill), skill) for t in made]
            instruction = {n: s for n, s in skills.items() if s.instructions is not None}
            if instruction:
                library = Skill("skills", lambda _c: [], "Instruction skills.", source="builtin")
                for tool in make_library_tools(self.context, self.skills_with_instructions):
                    tool.description += f" Skills:\n{catalog_text(instruction)}"
                    tools.append((tool, library))
            for tool, skill in tools:
                other = owner.get(tool.name)
                if other is not None:
                    raise UserError(
                        f"two skills define the tool {tool.name!r}: {other.name} ({other.source}) "
                        f"and {skill.name} ({skill.source}); disable or remove one of them"
                    )
                owner[tool.name] = skill
        except BaseException:
            _close_all(started)
            raise
        return tools

    def skills_with_instructions(self) -> Mapping[str, Skill]:
        return {n: s for n, s in self.skills.items() if s.instructions is not None}

    def close(self) -> None:
        """Close every started skill (MCP connections, processes)."""
        _close_all(self.skills.values())


def _close_all(skills: Iterable[Skill]) -> None:
    for skill in skills:
        if skill.close is not None:
            with contextlib.suppress(Exception):
                skill.close()


def _declare_consequences(context: SkillContext, skill: Skill, tools: list[Tool]) -> None:
    """A skill's manifest names its consequential tools; every tool of a skill that may reach
    the network is consequential and outbound, all its arguments checked word by word."""
    flow = context.policy.flow
    for name, arguments in skill.consequential.items():
        flow.add(name, dict.fromkeys(arguments, "words"))
    if skill.permissions is not None and skill.permissions.network:
        for tool in tools:
            flow.add(rule_target(tool).name, {"*": "words"}, outbound=True)


def _sourced(tool: Tool, skill: Skill) -> Tool:
    with contextlib.suppress(AttributeError):
        tool.source = skill.source  # type: ignore[attr-defined]
    return tool


class LiveToolbox(Toolbox):
    """A toolbox whose tools can be swapped while the agent runs (hot reload).

    The next request offers the new tools; ``listeners`` are told after each swap (the front
    end refreshes what it derived from the tools, such as the system prompt's skills list);
    ``closers`` run on :meth:`close` (the folder watcher's ``stop``).
    """

    def __init__(
        self,
        tools: Iterable[Tool] = (),
        skillset: SkillSet | None = None,
        refine: Refine | None = None,
    ) -> None:
        super().__init__(tools, refine)
        self.skillset = skillset
        self.listeners: list[Callable[[], None]] = []
        self.closers: list[Callable[[], None]] = []

    def replace(self, tools: Iterable[Tool]) -> None:
        fresh = Toolbox(tools)
        self._tools = dict(fresh.as_mapping())  # one assignment: a running turn sees old or new
        for listener in self.listeners:
            listener()

    def close(self) -> None:
        """Stop watching for changes (the tools stay as they are)."""
        for closer in self.closers:
            closer()


def build_tools(
    context: SkillContext, enabled: list[str] | None = None, pm: pluggy.PluginManager | None = None
) -> list[tuple[Tool, str]]:
    """The unguarded tools of the enabled skills, each with where it comes from."""
    skillset = SkillSet(context, enabled, pm)
    skillset.load()
    return [(tool, skill.source) for tool, skill in skillset.tools]


def guard(
    skillset: SkillSet,
    approver: Approver | None,
    save_rule: Callable[[str], object] | None = None,
) -> list[Tool]:
    """Every tool of ``skillset`` behind the policy, approvals, redaction and audit."""
    c = skillset.context
    return [
        GuardedTool(
            t, c.policy, approver, c.audit, c.redactor, save_rule, label=output_label(t, skill)
        )
        for t, skill in skillset.tools
    ]


def output_label(tool: Tool, skill: Skill) -> Provenance | None:
    """How a skill's results are labelled: a built-in's tools label their own; any other
    skill's results are untrusted unless its manifest says its output is trusted. A label the
    tool declares itself (an MCP server's) is kept."""
    declared = getattr(tool, "provenance", None)
    if skill.trusted or isinstance(declared, Provenance):
        return None
    return Provenance(kind="skill", origin=skill.name, trusted=skill.output_trusted)


def build_toolbox(
    context: SkillContext,
    approver: Approver | None,
    enabled: list[str] | None = None,
    *,
    pm: pluggy.PluginManager | None = None,
    check_sandbox: bool = True,
    save_rule: Callable[[str], object] | None = None,
    watch: Callable[[str], None] | None = None,
) -> LiveToolbox:
    """The toolbox an agent runs with: every tool of the enabled skills behind
    :class:`GuardedTool` (policy, approvals, redaction, audit).

    ``approver`` gives standing answers to asks (``--yes``, a terminal outside a run); with
    None, an ask in a run is an event the front end answers. ``save_rule`` keeps "always"
    answers (the config file). With ``watch`` (a function that shows a one-line notice) the
    skills folder is watched and the toolbox rebuilt in place when a skill is added, changed,
    removed or approved.

    With ``check_sandbox`` (the default) a sandbox that cannot start is a :class:`UserError`
    now, before any model call, rather than a failure on the first command.
    """
    if check_sandbox:
        context.runner.check()
    skillset = SkillSet(context, enabled, pm)
    skillset.load()
    toolbox = LiveToolbox(
        guard(skillset, approver, save_rule), skillset, refine=workspace_enums(context.workspace)
    )
    if watch is not None:
        from skills.reload import SkillWatcher  # it rebuilds through this module's parts

        watcher = SkillWatcher(skillset, toolbox, approver, watch, save_rule)
        watcher.start()
        toolbox.closers.append(watcher.stop)
    return toolbox
