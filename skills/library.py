"""``skill_read`` and ``skill_run``: how the model uses instruction (SKILL.md) skills.

The model sees each skill's name and description; it reads the instructions (or a file from
``references/``) with ``skill_read`` when one applies, and runs a file from ``scripts/`` with
``skill_run``. A script runs in the OS sandbox held to its skill's manifest: only the programs
it declares, only its variables, no network and no writes unless declared.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated

from pydantic import Field

from agent.errors import ToolError
from agent.provenance import Provenance
from agent.tools import Tool, ToolResult, function_tool
from sandbox.rules import ValueSubject
from skills.context import SkillContext
from skills.guard import with_rule
from skills.permissions import scoped_context
from skills.shell import format_result
from skills.skill import Skill

MAX_READ = 60_000
_INTERPRETERS = {".sh": "bash", ".bash": "bash", ".py": "python3"}


def catalog_text(skills: Mapping[str, Skill]) -> str:
    """The lines the system prompt and ``skill_read`` show: name and description only."""
    return "\n".join(f"- {s.name}: {s.description}" for s in skills.values())


def make_library_tools(
    context: SkillContext, skills: Callable[[], Mapping[str, Skill]]
) -> list[Tool]:
    """The two tools, over whichever instruction skills ``skills()`` returns at call time."""

    def find(name: str) -> Skill:
        known = skills()
        skill = known.get(name)
        if skill is None or skill.path is None:
            names = ", ".join(known) or "(none)"
            raise ToolError(f"there is no skill {name!r}; skills: {names}")
        return skill

    def inside(skill: Skill, relative: str) -> Path:
        assert skill.path is not None  # find() returns only skills with a folder
        root = skill.path.resolve()
        target = (root / relative).resolve()
        if not target.is_relative_to(root) or not target.is_file():
            raise ToolError(f"{relative!r} is not a file of the skill {skill.name!r}")
        return target

    def skill_read(
        skill: Annotated[str, Field(description="the skill's name")],
        path: Annotated[
            str, Field(description="SKILL.md, or a file under references/ or scripts/")
        ] = "SKILL.md",
    ) -> ToolResult:
        """Read a skill's instructions (SKILL.md) or one of its files."""
        found = find(skill)
        text = inside(found, path).read_text(encoding="utf-8", errors="replace")
        if len(text) > MAX_READ:
            text = text[:MAX_READ] + f"\n[cut at {MAX_READ} characters]"
        return ToolResult.text(text)

    def skill_run(
        skill: Annotated[str, Field(description="the skill's name")],
        script: Annotated[str, Field(description="a file under scripts/, e.g. scripts/run.sh")],
        args: Annotated[list[str], Field(description="arguments for the script")] = [],  # noqa: B006
    ) -> ToolResult:
        """Run one of a skill's scripts in the sandbox, held to the skill's permissions."""
        found = find(skill)
        if not script.startswith("scripts/"):
            raise ToolError("only files under scripts/ can be run; see the skill's SKILL.md")
        path = inside(found, script)
        argv = script_argv(path, list(args))
        assert found.permissions is not None  # instruction skills always carry a manifest
        scoped = scoped_context(context, found.name, found.permissions)
        # What a third-party program prints is its author's words, unless the manifest vouches.
        label = Provenance(kind="skill", origin=found.name, trusted=found.output_trusted)
        return ToolResult.text(format_result(scoped.runner.run(argv)), provenance=label)

    read = function_tool(skill_read)
    run = function_tool(skill_run)
    return [
        with_rule(read, "skills.read", "read", ValueSubject("skill")),
        with_rule(run, "skills.run", "exec", ValueSubject("skill")),
    ]


def script_argv(path: Path, args: list[str]) -> list[str]:
    """The command for a script: its text passed to its interpreter (the folder stays unmounted).

    The skill's folder is not visible inside the sandbox, so the script's text is handed to
    ``bash -c`` (or ``python3 -c``); for bash that also lets the manifest check see every
    program the script starts.
    """
    text = path.read_text(encoding="utf-8", errors="replace")
    interpreter = _INTERPRETERS.get(path.suffix)
    first = text.splitlines()[0] if text else ""
    if first.startswith("#!"):
        words = first[2:].split()
        name = words[-1] if words and words[0].endswith("/env") else (words or [""])[0]
        interpreter = name.rsplit("/", 1)[-1] or interpreter
    if interpreter in ("bash", "sh", "dash"):
        return [interpreter, "-c", text, path.name, *args]
    if interpreter and interpreter.startswith("python"):
        return [interpreter, "-c", text, *args]
    raise ToolError(
        f"cannot tell how to run {path.name}: give it a #! line or a .sh or .py extension"
    )
