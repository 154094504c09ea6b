"""Extension points: pluggy hook specifications, loaded from entry-point groups.

Built-in backends, skills and connectors register through these same hooks (entry points
``clawloop.backends``, ``clawloop.skills`` and ``clawloop.connectors`` in pyproject.toml), so a
third-party plugin is never second-class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("clawloop")
hookimpl = pluggy.HookimplMarker("clawloop")

ENTRY_POINT_GROUPS = ("clawloop.backends", "clawloop.skills", "clawloop.connectors")


class HookSpecs:
    """The hooks a clawloop plugin may implement."""

    @hookspec
    def register_backends(self, register: Callable[[str, Callable[..., Any]], None]) -> None:
        """Call ``register(name, factory)`` for each backend; ``factory(**options)`` builds one."""

    @hookspec
    def register_skills(self, register: Callable[[str, Callable[..., Any]], None]) -> None:
        """Call ``register(name, factory)`` per skill; ``factory(context)`` returns its tools."""

    @hookspec
    def register_connectors(self, register: Callable[[str, Callable[..., Any]], None]) -> None:
        """Call ``register(name, factory)`` for each chat connector."""


def plugin_manager(load_entry_points: bool = True) -> pluggy.PluginManager:
    """A plugin manager with clawloop's hooks and every installed plugin loaded."""
    pm = pluggy.PluginManager("clawloop")
    pm.add_hookspecs(HookSpecs)
    if load_entry_points:
        for group in ENTRY_POINT_GROUPS:
            pm.load_setuptools_entrypoints(group)
    return pm


def collect(pm: pluggy.PluginManager, hook: str) -> dict[str, Callable[..., Any]]:
    """Run one ``register_*`` hook and return the registered factories by name."""
    found: dict[str, Callable[..., Any]] = {}

    def register(name: str, factory: Callable[..., Any]) -> None:
        found.setdefault(name, factory)

    getattr(pm.hook, hook)(register=register)
    return found
