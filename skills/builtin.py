"""The built-in skills, registered through the same hook a third-party plugin uses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.plugins import hookimpl
from skills.files import make_files_tools
from skills.shell import make_shell_tools
from skills.simple import make_simple_tools


@hookimpl
def register_skills(register: Callable[[str, Callable[..., Any]], None]) -> None:
    """``shell``, ``files`` and ``simple``; each factory takes a
    :class:`skills.context.SkillContext`."""
    register("shell", make_shell_tools)
    register("files", make_files_tools)
    register("simple", make_simple_tools)
