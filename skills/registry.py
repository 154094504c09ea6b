"""The one registry of skills: built-ins, Python plugins, skill folders and MCP servers.

Every Python skill, built in or not, comes through the ``register_skills`` hook: entry points
in the group ``clawloop.skills`` (the built-ins are one of them), and single ``.py`` files in
the user's skills folder, registered as plugins too. Folders with a ``SKILL.md`` and the MCP
servers in the config become skills here as well. Two skills with one name are a
:class:`UserError` naming both sources.

Importing a ``.py`` file runs it, so when asked to verify (every agent run) a file is
imported only if its bytes are the ones the user approved, and it is those very bytes that run:
a file changed behind the lock is reported and never executed. The ``agent skills`` commands
that show or approve a skill (run by the user, on purpose) import without the lock.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy

from agent.errors import UserError
from agent.plugins import each_registration, plugin_manager
from sandbox.safewalk import read_regular
from skills.instructions import is_instruction_skill, load_instruction_skill
from skills.lock import LockFile
from skills.skill import Permissions, Skill

MAX_SKILL_FILE = 4 * 1024 * 1024


@dataclass(slots=True)
class Discovery:
    """Every skill found, and what could not be loaded (shown by ``agent skills check``)."""

    skills: dict[str, Skill] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    held: dict[str, str] = field(default_factory=dict)  # skill files not run: name -> why

    def add(self, skill: Skill) -> None:
        other = self.skills.get(skill.name)
        if other is not None:
            raise UserError(
                f"two skills are named {skill.name!r}: {other.source} and {skill.source}; "
                "remove or rename one of them"
            )
        self.skills[skill.name] = skill


def skills_plugin_manager(
    skills_dir: Path | None = None,
    lock: LockFile | None = None,
    *,
    verify: bool = False,
    held: dict[str, str] | None = None,
) -> tuple[pluggy.PluginManager, list[str]]:
    """The plugin manager for skills: entry points, then the ``.py`` files in ``skills_dir``
    (with ``verify``, only those ``lock`` approves as they are; none without a lock). The
    files not run go to ``held`` (name -> "new" or "changed")."""
    pm = plugin_manager(groups=("clawloop.skills",))
    problems: list[str] = []
    for path in sorted(skills_dir.glob("*.py")) if skills_dir and skills_dir.is_dir() else []:
        data = read_regular(path, MAX_SKILL_FILE)
        if data is None:
            problems.append(f"{path}: not a regular file; not loaded")
            continue
        if verify:
            name, status = lock.file_status(path, data) if lock else (path.stem, "new")
            if status != "approved":
                (held if held is not None else {})[name] = status
                problems.append(
                    f"{path}: {status} since it was approved, so it was not run; "
                    f"review it, then `agent skills approve {name}`"
                )
                continue
        try:
            pm.register(_import_file(path, data), name=f"file {path}")
        except Exception as exc:  # a broken user file must not stop the others
            problems.append(f"{path}: cannot be loaded ({type(exc).__name__}: {exc})")
    return pm, problems


def discover(
    skills_dir: Path | None = None,
    mcp_servers: Mapping[str, Any] | None = None,
    pm: pluggy.PluginManager | None = None,
    lock: LockFile | None = None,
    *,
    verify: bool = False,
) -> Discovery:
    """Every registered skill with its source set; non-built-ins always carry a manifest.

    With ``verify``, a ``.py`` skill file is run only if ``lock`` approves its content."""
    found = Discovery()
    if pm is None:
        pm, found.problems = skills_plugin_manager(skills_dir, lock, verify=verify, held=found.held)
    for source, plugin, args in each_registration(pm, "register_skills"):
        for skill in args:
            if not isinstance(skill, Skill):
                raise UserError(f"{source} registered {skill!r}, which is not a skills.skill.Skill")
            skill.source = source
            if source != "builtin":
                # A plugin that declares nothing is held to nothing: the empty manifest.
                skill.permissions = skill.permissions or Permissions()
                skill.metadata.setdefault("module", getattr(plugin, "__name__", ""))
                if source.startswith("file "):
                    skill.path = Path(source[5:])
            found.add(skill)
    if skills_dir is not None and skills_dir.is_dir():
        for folder in sorted(p for p in skills_dir.iterdir() if is_instruction_skill(p)):
            try:
                skill = load_instruction_skill(folder)
            except UserError as exc:
                found.problems.append(exc.message)
                continue
            skill.source = f"folder {folder}"
            found.add(skill)
    if mcp_servers:
        from skills.mcp.skill import mcp_skill

        for name, server in mcp_servers.items():
            found.add(mcp_skill(name, server))
    return found


def _import_file(path: Path, data: bytes) -> object:
    """Run ``data`` (the content of ``path``, already checked) as a module of its own.

    The bytes that were checked are the bytes that run: the file is not read again.
    """
    name = f"clawloop_skill_file_{path.stem}"
    spec = importlib.util.spec_from_loader(name, loader=None, origin=str(path))
    if spec is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    module.__file__ = str(path)
    code = compile(data, str(path), "exec")
    sys.modules[name] = module
    exec(code, module.__dict__)
    return module
