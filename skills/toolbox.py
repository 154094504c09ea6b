"""Building the agent's toolbox: collect skills through the plugin hook, guard every tool."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pluggy

from agent.errors import UserError
from agent.plugins import collect, plugin_manager
from agent.tools import Tool, Toolbox
from skills.context import SkillContext
from skills.guard import Approver, GuardedTool

DEFAULT_SKILLS = ("shell", "files")


def skills_plugin_manager() -> pluggy.PluginManager:
    """A plugin manager with the ``clawloop.skills`` entry points loaded (only those)."""
    pm = plugin_manager(load_entry_points=False)
    pm.load_setuptools_entrypoints("clawloop.skills")
    return pm


def skill_factories(pm: pluggy.PluginManager | None = None) -> dict[str, Callable[..., Any]]:
    """Every registered skill factory by name (built-in ones included)."""
    pm = pm or skills_plugin_manager()
    from skills import builtin

    # Installed, the built-ins come in through their entry point; from a source tree, register
    # the same module by hand so they still go through the hook.
    if not any(p is builtin for p in pm.get_plugins()):
        pm.register(builtin)
    return collect(pm, "register_skills")


def skill_source(factory: Callable[..., Any], pm: pluggy.PluginManager | None = None) -> str:
    """ "builtin" or the distribution a plugin skill comes from."""
    module = getattr(factory, "__module__", "") or ""
    if module.startswith("skills."):
        return "builtin"
    pm = pm or skills_plugin_manager()
    for plugin, dist in pm.list_plugin_distinfo():
        if getattr(plugin, "__name__", None) == module or sys.modules.get(module) is plugin:
            return f"plugin {dist.metadata['name']}"
    return f"plugin {module}"


def build_tools(
    context: SkillContext, enabled: list[str] | None = None, pm: pluggy.PluginManager | None = None
) -> list[tuple[Tool, str]]:
    """The unguarded tools of the enabled skills, each with where it comes from."""
    pm = pm or skills_plugin_manager()
    factories = skill_factories(pm)
    names = list(DEFAULT_SKILLS if enabled is None else enabled)
    unknown = [n for n in names if n not in factories]
    if unknown:
        raise UserError(
            f"unknown skill {', '.join(map(repr, unknown))}; "
            f"known skills: {', '.join(sorted(factories))}"
        )
    tools: list[tuple[Tool, str]] = []
    for name in names:
        source = skill_source(factories[name], pm)
        tools += [(tool, source) for tool in factories[name](context)]
    return tools


def build_toolbox(
    context: SkillContext,
    approver: Approver | None,
    enabled: list[str] | None = None,
    *,
    pm: pluggy.PluginManager | None = None,
    check_sandbox: bool = True,
    save_rule: Callable[[str], object] | None = None,
) -> Toolbox:
    """The toolbox an agent runs with: every tool wrapped in :class:`GuardedTool`.

    ``approver`` answers asks only for calls made outside a run (``agent tools call``); in a
    run, an ask is an event the front end answers. ``save_rule`` keeps "always" answers.

    With ``check_sandbox`` (the default) a sandbox that cannot start is a :class:`UserError`
    now, before any model call, rather than a failure on the first command.
    """
    if check_sandbox:
        context.runner.check()
    guarded = [
        GuardedTool(tool, context.policy, approver, context.audit, context.redactor, save_rule)
        for tool, _source in build_tools(context, enabled, pm)
    ]
    return Toolbox(guarded)
