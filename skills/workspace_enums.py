"""Path arguments offered as an enum of what is really in the workspace.

A tool marks a string argument with ``"x-workspace": "file" | "folder" | "script"`` in its
schema. Before each request, :func:`workspace_enums` replaces the mark with an ``enum`` of the
workspace's files (or folders, or scripts), so a grammar-constrained model can only name a real
one, and a model that reads the schema sees the real names. A workspace too big to list
(more than ``limit`` entries) keeps the plain string argument.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.messages import FunctionSpec, ToolSpec
from sandbox.safewalk import Walk

MARK = "x-workspace"
LIMIT = 64
_SKIP = frozenset({".git", "node_modules", "__pycache__", ".venv"})
_SCRIPTS = (".py", ".sh")


def list_workspace(root: Path, limit: int = LIMIT) -> tuple[list[str], list[str]] | None:
    """The workspace's files and folders (relative, sorted), or None past ``limit`` entries."""
    files: list[str] = []
    folders: list[str] = ["."]
    # Bounded and link-free (sandbox.safewalk): the workspace is written by sandboxed commands.
    walk = Walk(root, limit * 4, seconds=2.0)
    for entry in walk:
        if entry.kind == "dir" and entry.name not in _SKIP:
            folders.append(os.path.relpath(entry.path, root))
        elif entry.kind == "file":
            files.append(os.path.relpath(entry.path, root))
        entry.prune = entry.name in _SKIP
        if len(files) + len(folders) > limit:
            return None
    if not walk.complete:
        return None
    return sorted(files), sorted(folders)


def workspace_enums(root: Path, limit: int = LIMIT) -> Callable[[list[ToolSpec]], list[ToolSpec]]:
    """A refiner for :class:`agent.tools.Toolbox` that fills marked path arguments."""

    def refine(specs: list[ToolSpec]) -> list[ToolSpec]:
        if not any(_marked(s.function.parameters) for s in specs):
            return specs
        listing = list_workspace(root, limit)
        choices: dict[str, list[str]] = {}
        if listing is not None:
            files, folders = listing
            choices = {
                "file": files,
                "folder": folders,
                "script": [f for f in files if f.endswith(_SCRIPTS)],
            }
        return [_refined(s, choices) for s in specs]

    return refine


def _marked(schema: dict[str, Any]) -> bool:
    return any(MARK in p for p in (schema.get("properties") or {}).values())


def _refined(spec: ToolSpec, choices: dict[str, list[str]]) -> ToolSpec:
    params = spec.function.parameters
    if not _marked(params):
        return spec
    params = copy.deepcopy(params)
    for prop in params["properties"].values():
        kind = prop.pop(MARK, None)
        if kind is not None and choices.get(kind):
            prop["enum"] = choices[kind]
    function = FunctionSpec(
        name=spec.function.name, description=spec.function.description, parameters=params
    )
    return ToolSpec(function=function)
