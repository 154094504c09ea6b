"""A clawloop skill: count the words and lines of files in the workspace.

It reads files only through ``context.paths`` and runs programs only through
``context.runner``, so clawloop holds it to the permissions it declares below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from pydantic import Field

from agent.plugins import hookimpl
from agent.tools import Tool, function_tool
from skills.context import SkillContext
from skills.guard import with_rule
from skills.skill import DefaultRules, Permissions, Skill

PERMISSIONS = Permissions(commands=["wc"], read=["**/*.txt", "**/*.md"])


def start(context: SkillContext) -> list[Tool]:
    """Build the skill's tools for one run."""

    def word_count(
        path: Annotated[str, Field(description="a .txt or .md file in the workspace")],
    ) -> str:
        """Count the words in a text file."""
        text = context.paths.resolve(path).read_text(encoding="utf-8", errors="replace")
        return f"{path}: {len(text.split())} words"

    def line_count(
        path: Annotated[str, Field(description="a .txt or .md file in the workspace")],
    ) -> str:
        """Count the lines of a text file with wc -l."""
        context.paths.resolve(path)  # refused outside the declared read paths
        result = context.runner.run(["wc", "-l", path])
        return result.stdout.strip() or result.stderr.strip()

    return [
        with_rule(function_tool(word_count), "wordcount.words", "read"),
        with_rule(function_tool(line_count), "wordcount.lines", "read"),
    ]


@hookimpl
def register_skills(register: Callable[[Skill], None]) -> None:
    """Register the skill, as every clawloop skill does."""
    register(
        Skill(
            name="wordcount",
            start=start,
            description="Count words and lines of text files.",
            permissions=PERMISSIONS,
            rules=DefaultRules(allow=["wordcount.*"]),
        )
    )
