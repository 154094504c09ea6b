"""Recipes as tools: the model fills plain arguments, clawloop runs the recipe's command.

A small model cannot write ``grep -c -i -F -- harbor notes.txt``, but it can pick
``count_lines_with`` and copy "notes.txt" and "harbor" from the request. Each argument is
checked for its kind (a file that exists in the workspace, a whole number, an extension) and
handed to ``bash -c`` as a positional argument, so no value becomes shell text. The command
runs inside the OS sandbox like every command; the permission rules see a recipe as the
narrow file tool it stands for (``files.read`` or ``files.write`` on its first path).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.errors import ToolError
from agent.tools import Tool, ToolResult
from sandbox.rules import PathSubject
from skills.context import SkillContext
from skills.guard import with_rule
from skills.recipes.catalog import BUNDLED, PATH_KINDS, Kind, Recipe, load_recipes
from skills.simple_command import observation

MAX_VALUE = 200
_EXT = re.compile(r"^\.[A-Za-z0-9_+-]{1,16}$")
_DESCRIBE: dict[str, str] = {
    "file": "a file in the workspace",
    "folder": "a folder in the workspace",
    "script": "a .py or .sh file",
    "path": "a file or folder name in the workspace",
    "word": "the word or text",
    "text": "the text",
    "key": "the key, setting or column name",
    "value": "the new value",
    "number": "a whole number",
    "ext": "a file extension, such as .txt",
}
_WORKSPACE = ("file", "folder", "script")  # kinds offered as the workspace's own list


@dataclass(slots=True)
class RecipeTool:
    """One recipe, called with JSON arguments."""

    recipe: Recipe
    context: SkillContext
    name: str = field(init=False)
    description: str = field(init=False)
    parameters: dict[str, Any] = field(init=False)
    source: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.recipe.name
        self.description = self.recipe.description
        self.parameters = schema(self.recipe)
        self.source = self.recipe.source

    def call(self, arguments: dict[str, Any]) -> ToolResult:
        values = [self._value(name, kind, arguments.get(name)) for name, kind in self.recipe.args]
        extra = set(arguments) - {name for name, _ in self.recipe.args}
        if extra:
            raise ToolError(f"{self.name} takes no argument {sorted(extra)[0]!r}")
        result = self.context.runner.run(["bash", "-c", self.recipe.script(), self.name, *values])
        if result.timed_out:
            raise ToolError(f"{self.name} did not finish in time and was stopped")
        shown = observation(result)
        worked = result.exit_code == 0 or (result.exit_code == 1 and not result.stderr.strip())
        if not worked:
            raise ToolError(shown)
        if self.recipe.says is None or (
            not result.stdout.strip() and "{output}" in self.recipe.says
        ):
            return ToolResult.text(shown)
        # What the user would call each value: the path as given, not its "./-x" form.
        named = {
            n: v[2:] if kind in PATH_KINDS and v.startswith("./-") else v
            for (n, kind), v in zip(self.recipe.args, values, strict=True)
        }
        return ToolResult.text(_fill(self.recipe.says, {**named, "output": one_line(shown)}))

    def _value(self, name: str, kind: Kind, value: Any) -> str:
        if value is None:
            raise ToolError(f"{self.name} needs {name} ({_DESCRIBE[kind]})")
        if kind == "number":
            if isinstance(value, bool) or not isinstance(value, int | str):
                raise ToolError(f"{name} must be a whole number")
            text = str(value).strip()
            if not text.isdigit() or len(text) > 9:
                raise ToolError(f"{name} must be a whole number, not {value!r}")
            return str(int(text))
        if not isinstance(value, str) or not value.strip() or "\0" in value:
            raise ToolError(f"{name} must be {_DESCRIBE[kind]}")
        if len(value) > MAX_VALUE:
            raise ToolError(f"{name} is longer than {MAX_VALUE} characters")
        if kind == "ext":
            ext = "." + value.strip().lstrip("*").lstrip(".")
            if not _EXT.match(ext):
                raise ToolError(f"{name} must be a file extension such as .txt, not {value!r}")
            return ext
        if kind in PATH_KINDS:
            path = value.strip()
            # Inside the workspace and not one of clawloop's own places; raises ToolError.
            self.context.paths.resolve(path, for_write=self.recipe.effect == "write")
            return f"./{path}" if path.startswith("-") else path
        if kind in ("word", "key"):
            # " meadow" is never a search for the space before it: models pad what they copy
            return value.strip()
        return value


def schema(recipe: Recipe) -> dict[str, Any]:
    """The JSON schema of a recipe's arguments, path kinds marked for the workspace's list."""
    properties: dict[str, Any] = {}
    for name, kind in recipe.args:
        prop: dict[str, Any] = {
            "type": "integer" if kind == "number" else "string",
            "description": _DESCRIBE[kind],
        }
        if kind in _WORKSPACE:
            prop["x-workspace"] = kind
        properties[name] = prop
    return {"type": "object", "properties": properties, "required": [n for n, _ in recipe.args]}


def one_line(output: str) -> str:
    """Several lines of output as one, joined by " | ": a small model copies a sentence whole
    into its answer but stops at the first line break."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return " | ".join(lines)


def _fill(template: str, values: dict[str, str]) -> str:
    return re.sub(r"\{([a-z][a-z0-9_]*)\}", lambda m: values.get(m.group(1), m.group(0)), template)


def recipe_tools(recipes: list[Recipe], context: SkillContext) -> list[Tool]:
    """Each recipe as a tool, ruled as the narrow file tool it stands for."""
    tools: list[Tool] = []
    for recipe in recipes:
        rule = "files.write" if recipe.effect == "write" else "files.read"
        subject = PathSubject(recipe.subject) if recipe.subject else None
        tools.append(with_rule(RecipeTool(recipe, context), rule, recipe.effect, subject))
    return tools


def all_recipes(recipe_file: str | None) -> list[Recipe]:
    """The bundled recipes and the user's own (``[small] recipe_file``), theirs winning a name."""
    recipes = {r.name: r for r in load_recipes(BUNDLED, "bundled")}
    if recipe_file:
        recipes.update((r.name, r) for r in load_recipes(Path(recipe_file).expanduser(), "user"))
    return list(recipes.values())


def recipe_names(recipe_file: str | None) -> list[str]:
    """The names of the recipe tools a run offers."""
    return [r.name for r in all_recipes(recipe_file)]


def make_recipe_tools(context: SkillContext) -> list[Tool]:
    """The recipe tools for this context."""
    return recipe_tools(all_recipes(context.options.get("recipe_file")), context)
