"""Generators of the curriculum's reading, counting, arithmetic and searching families."""

from __future__ import annotations

from cli.evals.generators.base import Generator

READ_FAMILIES: dict[str, Generator] = {}
