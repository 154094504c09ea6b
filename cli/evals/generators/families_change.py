"""Generators of the curriculum's structured-file, editing, file-management, script, multi-step
and chat families, gathered from one module per kind."""

from __future__ import annotations

from cli.evals.generators.base import Generator
from cli.evals.generators.families_chat import CHAT_FAMILIES
from cli.evals.generators.families_editing import EDITING_FAMILIES
from cli.evals.generators.families_scripts import SCRIPT_FAMILIES
from cli.evals.generators.families_structured import STRUCTURED_FAMILIES

CHANGE_FAMILIES: dict[str, Generator] = {
    **STRUCTURED_FAMILIES,
    **EDITING_FAMILIES,
    **SCRIPT_FAMILIES,
    **CHAT_FAMILIES,
}
