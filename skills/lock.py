"""The lock file: every installed skill pinned by a sha256 of its content and its manifest.

A skill that is not in the lock file, or whose content no longer hashes to what the user
approved, is disabled until the user approves it again (``agent skills approve NAME``), and
the user is shown how its manifest changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agent.errors import UserError
from skills.skill import Permissions, Skill

Status = Literal["builtin", "approved", "new", "changed"]
_SKIP = frozenset({"__pycache__", ".git", ".mypy_cache", ".pytest_cache"})


def content_hash(skill: Skill) -> str:
    """sha256 over the skill's files (a folder, a file, or its plugin's module) and manifest."""
    return _digest(_files(skill), (skill.permissions or Permissions()).model_dump())


def _digest(files: list[tuple[str, bytes]], manifest: dict[str, Any]) -> str:
    digest = hashlib.sha256()
    for rel, data in files:
        digest.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
    digest.update(json.dumps(manifest, sort_keys=True).encode())
    return digest.hexdigest()


def _files(skill: Skill) -> list[tuple[str, bytes]]:
    root = skill.path
    if root is None:
        module = sys.modules.get(str(skill.metadata.get("module", "")))
        file = getattr(module, "__file__", None)
        if file is None:
            return []
        root = Path(file).parent if Path(file).name == "__init__.py" else Path(file)
    if root.is_file():
        return [(root.name, root.read_bytes())]
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP)
        for name in sorted(filenames):
            if name.endswith(".pyc"):
                continue
            path = Path(dirpath) / name
            out.append((path.relative_to(root).as_posix(), path.read_bytes()))
    return out


@dataclass(slots=True)
class LockFile:
    """``skills.lock.json`` in the data folder: name -> source, sha256, manifest."""

    path: Path

    def entries(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, json.JSONDecodeError) as exc:
            raise UserError(
                f"the skills lock file {self.path} cannot be read ({exc}); "
                "delete it and approve your skills again"
            ) from None
        skills = data.get("skills", {}) if isinstance(data, dict) else {}
        return skills if isinstance(skills, dict) else {}

    def status(self, skill: Skill) -> Status:
        """Whether the skill may run: built in, approved as it is, never approved, or changed."""
        if skill.trusted:
            return "builtin"
        entry = self.entries().get(skill.name)
        if entry is None or entry.get("source") != skill.source:
            return "new"
        return "approved" if entry.get("sha256") == content_hash(skill) else "changed"

    def file_status(self, path: Path, data: bytes) -> tuple[str, Status]:
        """The name and status of the ``.py`` skill file ``path`` whose content is ``data``,
        found without running it (importing runs it): approved only if ``data`` is exactly
        what the user approved. The lock entry's hash covers the file and the manifest the
        user saw, and the manifest is in the entry. A file the lock does not know is "new",
        under its file name.
        """
        source = f"file {path}"
        for name, entry in self.entries().items():
            if not isinstance(entry, dict) or entry.get("source") != source:
                continue
            manifest = Permissions.model_validate(entry.get("permissions", {})).model_dump()
            if entry.get("sha256") == _digest([(path.name, data)], manifest):
                return name, "approved"
            return name, "changed"
        return path.stem, "new"

    def approved_permissions(self, name: str) -> Permissions | None:
        entry = self.entries().get(name)
        return None if entry is None else Permissions.model_validate(entry.get("permissions", {}))

    def approve(self, skill: Skill) -> None:
        """Pin the skill as it is now."""
        entries = self.entries()
        entries[skill.name] = {
            "source": skill.source,
            "sha256": content_hash(skill),
            "permissions": (skill.permissions or Permissions()).model_dump(),
        }
        self._write(entries)

    def forget(self, name: str) -> None:
        entries = self.entries()
        if entries.pop(name, None) is not None:
            self._write(entries)

    def _write(self, entries: dict[str, dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"version": 1, "skills": entries}, indent=2) + "\n")
        os.replace(tmp, self.path)


def manifest_diff(old: Permissions | None, new: Permissions) -> list[str]:
    """What a re-approval would grant or take away, one line per change."""
    before = (old or Permissions()).model_dump()
    lines = []
    for key, values in new.model_dump().items():
        added = [v for v in values if v not in before[key]]
        removed = [v for v in before[key] if v not in values]
        lines += [f"+ {key}: {v}" for v in added] + [f"- {key}: {v}" for v in removed]
    return lines
