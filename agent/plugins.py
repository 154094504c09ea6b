"""Extension points: pluggy hook specifications, loaded from entry-point groups.

Built-in backends, skills and connectors register through these same hooks (entry points
``clawloop.backends``, ``clawloop.skills`` and ``clawloop.connectors`` in pyproject.toml), so a
third-party plugin is never second-class. This is the one place a plugin manager is built, and
the one place the built-ins are registered when their entry point is not loaded (a source tree
without installed metadata): the very module the entry point names, through the same hooks.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pluggy

from agent.errors import UserError

hookspec = pluggy.HookspecMarker("clawloop")
hookimpl = pluggy.HookimplMarker("clawloop")

ENTRY_POINT_GROUPS = ("clawloop.backends", "clawloop.skills", "clawloop.connectors")
# The module each group's ``builtin`` entry point names in pyproject.toml.
BUILTINS = {
    "clawloop.backends": "backends.builtin",
    "clawloop.skills": "skills.builtin",
    "clawloop.connectors": "connectors.builtin",
}


class HookSpecs:
    """The hooks a clawloop plugin may implement."""

    @hookspec
    def register_backends(self, register: Callable[[str, Callable[..., Any]], None]) -> None:
        """Call ``register(name, factory)`` for each backend; ``factory(**options)`` builds one."""

    @hookspec
    def register_skills(self, register: Callable[[Any], None]) -> None:
        """Call ``register(skill)`` with a ``skills.skill.Skill`` for each skill."""

    @hookspec
    def register_connectors(self, register: Callable[[str, Callable[..., Any]], None]) -> None:
        """Call ``register(name, factory)`` for each chat connector."""


def plugin_manager(
    load_entry_points: bool = True, groups: tuple[str, ...] = ENTRY_POINT_GROUPS
) -> pluggy.PluginManager:
    """A plugin manager with clawloop's hooks and the plugins of ``groups`` loaded, the
    built-ins always among them."""
    pm = pluggy.PluginManager("clawloop")
    pm.add_hookspecs(HookSpecs)
    if load_entry_points:
        for group in groups:
            pm.load_setuptools_entrypoints(group)
            _register_builtin(pm, group)
    return pm


def _register_builtin(pm: pluggy.PluginManager, group: str) -> None:
    """Register ``group``'s built-in module unless its entry point already did (the entry
    point is missing from a source tree, and each group's is named "builtin", so a manager of
    several groups loads only the first)."""
    name = BUILTINS.get(group)
    if name is None:
        return
    module = importlib.import_module(name)
    if not pm.is_registered(module):
        pm.register(module, name=f"builtin {group}")


def plugin_source(pm: pluggy.PluginManager, plugin: object) -> str:
    """Where a plugin comes from: ``builtin`` or ``plugin DIST`` (its distribution's name)."""
    for loaded, dist in pm.list_plugin_distinfo():
        if loaded is plugin:
            name = str(dist.metadata["name"])
            return "builtin" if name == "clawloop" else f"plugin {name}"
    # Registered by hand under a name that says where it is from: a built-in module (from a
    # source tree without installed metadata) or "file PATH".
    name = pm.get_name(plugin) or ""
    if name == "builtin" or name.startswith("builtin "):
        return "builtin"
    return name if name.startswith("file ") else f"plugin {name}"


Registration = tuple[str, object, tuple[Any, ...]]


def each_registration(pm: pluggy.PluginManager, hook: str) -> list[Registration]:
    """Run one ``register_*`` hook, plugin by plugin: ``(source, plugin, register's args)``."""
    found: list[Registration] = []
    for impl in getattr(pm.hook, hook).get_hookimpls():  # in registration order
        impl.function(register=_recorder(found, plugin_source(pm, impl.plugin), impl.plugin))
    return found


def _recorder(found: list[Registration], source: str, plugin: object) -> Callable[..., None]:
    def register(*args: Any) -> None:
        found.append((source, plugin, args))

    return register


def collect(pm: pluggy.PluginManager, hook: str) -> dict[str, Callable[..., Any]]:
    """Run a ``register(name, factory)`` hook; two plugins using one name is a UserError."""
    found: dict[str, Callable[..., Any]] = {}
    sources: dict[str, str] = {}
    for source, _plugin, (name, factory) in each_registration(pm, hook):
        if name in found:
            raise UserError(
                f"two plugins register {name!r}: {sources[name]} and {source}; "
                "uninstall one of them"
            )
        found[name], sources[name] = factory, source
    return found
