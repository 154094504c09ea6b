"""The built-ins register through the plugin hooks on one path, with or without metadata.

Installed, each group's ``builtin`` entry point registers its module; from a source tree
without installed metadata (no entry points at all), the plugin manager registers the very
module the entry point names. Either way every built-in backend, skill and connector comes
through the hook a third-party plugin uses, and reads as "builtin".
"""

from __future__ import annotations

import importlib.metadata

import pytest

from agent.plugins import ENTRY_POINT_GROUPS, collect, each_registration, plugin_manager

BACKENDS = {"fake", "llamacpp", "openai", "engine"}
CONNECTORS = {"telegram", "discord"}


def check_builtins(groups: tuple[str, ...] = ENTRY_POINT_GROUPS) -> None:
    pm = plugin_manager(groups=groups)
    if "clawloop.backends" in groups:
        assert set(collect(pm, "register_backends")) == BACKENDS
    if "clawloop.connectors" in groups:
        assert set(collect(pm, "register_connectors")) == CONNECTORS
    if "clawloop.skills" in groups:
        skills = each_registration(pm, "register_skills")
        names = {args[0].name for _source, _plugin, args in skills}
        assert {"files", "shell", "web", "mail", "memory"} <= names
        assert {source for source, _plugin, _args in skills} == {"builtin"}


@pytest.mark.parametrize("groups", [ENTRY_POINT_GROUPS, *((g,) for g in ENTRY_POINT_GROUPS)])
def test_every_group_has_its_builtins(groups: tuple[str, ...]) -> None:
    check_builtins(groups)


def test_without_entry_point_metadata_the_same_modules_register(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(importlib.metadata, "distributions", lambda **_: [])
    check_builtins()
    for group in ENTRY_POINT_GROUPS:
        check_builtins((group,))


def test_without_entry_points_nothing_is_registered() -> None:
    pm = plugin_manager(load_entry_points=False)
    assert pm.get_plugins() == set()
