"""Instruction skills: a folder with a ``SKILL.md`` (the AgentSkills / OpenClaw format).

``SKILL.md`` is YAML front matter (``name``, ``description``, optional ``metadata``) and then
markdown instructions; ``scripts/`` and ``references/`` are optional. The system prompt lists
only names and descriptions; the model reads the instructions with ``skill_read`` when one
applies and runs a script with ``skill_run``.

The permission manifest is ``permissions`` in the front matter (or
``metadata.clawloop.permissions``). A folder written for OpenClaw has none: its declared
requirements (``metadata.openclaw.requires.bins`` / ``env``) become its commands and
variables, so it loads unchanged and gets nothing more than it says it needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent.errors import UserError
from agent.tools import Tool
from skills.skill import Permissions, Skill

SKILL_FILE = "SKILL.md"


def is_instruction_skill(path: Path) -> bool:
    """Whether ``path`` is a skill folder."""
    return path.is_dir() and (path / SKILL_FILE).is_file()


def split_front_matter(text: str, where: Path) -> tuple[dict[str, Any], str]:
    """``(front matter, body)``; a missing or broken front matter is a UserError."""
    if not text.startswith("---"):
        raise UserError(f"{where}: SKILL.md must start with '---' and YAML front matter")
    _, _, rest = text.partition("\n")
    head, sep, body = rest.partition("\n---")
    if not sep:
        raise UserError(f"{where}: the front matter of SKILL.md is not closed with '---'")
    import yaml  # only where a SKILL.md is read: a run with none does not load it

    try:
        data = yaml.safe_load(head) or {}
    except yaml.YAMLError as exc:
        raise UserError(f"{where}: the front matter is not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise UserError(f"{where}: the front matter must be a YAML mapping")
    return data, body.partition("\n")[2].strip()


def load_instruction_skill(folder: Path) -> Skill:
    """The skill in ``folder``."""
    where = folder / SKILL_FILE
    data, body = split_front_matter(where.read_text(encoding="utf-8"), where)
    name = data.get("name")
    description = data.get("description")
    if not isinstance(name, str) or not name.strip():
        raise UserError(f"{where}: the front matter needs a `name`")
    if not isinstance(description, str) or not description.strip():
        raise UserError(f"{where}: the front matter needs a `description`")
    raw_meta = data.get("metadata")
    metadata: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    requires = _requires(metadata)
    raw = data.get("permissions") or metadata.get("clawloop", {}).get("permissions")
    if raw is None:
        raw = {"commands": requires.get("bins", []), "env": requires.get("env", [])}
    try:
        permissions = Permissions.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise UserError(f"{where}: permissions.{loc}: {err['msg']}") from None

    def start(_context: Any) -> list[Tool]:
        return []  # its tools are skill_read and skill_run, shared by every instruction skill

    own = metadata.get("clawloop")
    own = own if isinstance(own, dict) else {}
    return Skill(
        name=name.strip(),
        start=start,
        description=" ".join(description.split()),
        instructions=body,
        permissions=permissions,
        requires=requires,
        path=folder,
        metadata=metadata,
        output_trusted=own.get("trusted_output") is True,
    )


def _requires(metadata: dict[str, Any]) -> dict[str, list[str]]:
    """``bins`` and ``env`` from ``metadata.<runtime>.requires`` (openclaw, clawloop, ...)."""
    out: dict[str, list[str]] = {"bins": [], "env": []}
    for value in metadata.values():
        req = value.get("requires") if isinstance(value, dict) else None
        if not isinstance(req, dict):
            continue
        for key in ("bins", "env"):
            items = req.get(key) or []
            out[key] += [str(i) for i in items if str(i) not in out[key]]
    return out
