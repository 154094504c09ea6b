"""Generators of the curriculum's structured-file, editing, file-management, script, multi-step and chat families."""

from __future__ import annotations

from cli.evals.generators.base import Generator

CHANGE_FAMILIES: dict[str, Generator] = {}
