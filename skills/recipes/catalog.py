"""Command recipes read from TOML: one command line with named holes per recipe.

The format is described at the top of ``catalog.toml`` beside this file (the bundled recipes).
A hole ``{name}`` becomes ``"${N}"`` and ``${name}`` becomes ``${N}`` (for use inside double
quotes), where N is the argument's position: the values reach bash as positional arguments,
never as shell text. A mistake in a catalog is the catalog author's, so it raises
:class:`RecipeFileError` naming the file and the recipe.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from agent.errors import UserError

Kind = Literal["file", "folder", "script", "path", "word", "text", "key", "value", "number", "ext"]
KINDS: tuple[str, ...] = get_args(Kind)
PATH_KINDS = frozenset({"file", "folder", "script", "path"})
BUNDLED = Path(__file__).with_name("catalog.toml")

_NAME = re.compile(r"^[a-z][a-z0-9_]{1,47}$")
_ARG = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_HOLE = re.compile(r"(\$?)\{([a-z][a-z0-9_]*)\}")


class RecipeFileError(UserError):
    """A recipe file that cannot be used as written."""


@dataclass(frozen=True, slots=True)
class Recipe:
    """One recipe: a named command line whose holes the model fills."""

    name: str
    description: str
    command: str
    args: tuple[tuple[str, Kind], ...]
    says: str | None = None
    effect: Literal["read", "write"] = "read"
    source: str = "bundled"

    def script(self) -> str:
        """The command line for ``bash -c``, each hole turned into its positional argument."""
        position = {name: i + 1 for i, (name, _) in enumerate(self.args)}

        def hole(match: re.Match[str]) -> str:
            n = position[match.group(2)]
            return f"${{{n}}}" if match.group(1) else f'"${{{n}}}"'

        return _HOLE.sub(hole, self.command)

    @property
    def subject(self) -> str | None:
        """The argument permission rules name: the first path argument, if any."""
        return next((name for name, kind in self.args if kind in PATH_KINDS), None)


def load_recipes(path: Path, source: str | None = None) -> list[Recipe]:
    """The recipes in ``path``; raises :class:`RecipeFileError` on any mistake."""
    label = source or str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise RecipeFileError(
            f"recipe file {path} does not exist: fix [small] recipe_file"
        ) from exc
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RecipeFileError(f"recipe file {path} cannot be read: {exc}") from exc
    entries = data.get("recipe", [])
    if not isinstance(entries, list):
        raise RecipeFileError(f"recipe file {path}: write each recipe as [[recipe]]")
    recipes = [_recipe(entry, path, label) for entry in entries]
    seen: set[str] = set()
    for recipe in recipes:
        if recipe.name in seen:
            raise RecipeFileError(f"recipe file {path}: two recipes are named {recipe.name!r}")
        seen.add(recipe.name)
    return recipes


def _recipe(entry: Any, path: Path, source: str) -> Recipe:
    if not isinstance(entry, dict):
        raise RecipeFileError(f"recipe file {path}: each [[recipe]] must be a table")
    name = entry.get("name")
    where = f"recipe file {path}, recipe {name!r}"
    if not isinstance(name, str) or not _NAME.match(name):
        raise RecipeFileError(f"{where}: name must be lower_case letters, digits and _")
    unknown = set(entry) - {"name", "description", "command", "says", "effect", "args"}
    if unknown:
        raise RecipeFileError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    description, command = entry.get("description"), entry.get("command")
    if not isinstance(description, str) or not description.strip():
        raise RecipeFileError(f"{where}: needs a description (the words a user would use)")
    if not isinstance(command, str) or not command.strip():
        raise RecipeFileError(f"{where}: needs a command")
    says = entry.get("says")
    if says is not None and not isinstance(says, str):
        raise RecipeFileError(f"{where}: says must be a string")
    effect = entry.get("effect", "read")
    if effect not in ("read", "write"):
        raise RecipeFileError(f'{where}: effect must be "read" or "write"')
    raw_args = entry.get("args", {})
    if not isinstance(raw_args, dict):
        raise RecipeFileError(f"{where}: args must be a table of name = kind")
    args: list[tuple[str, Kind]] = []
    for arg, kind in raw_args.items():
        if not _ARG.match(arg) or arg == "output":
            raise RecipeFileError(f"{where}: argument name {arg!r} is not allowed")
        if kind not in KINDS:
            raise RecipeFileError(f"{where}: argument {arg!r} has kind {kind!r}; one of {KINDS}")
        args.append((arg, kind))
    names = {a for a, _ in args}
    holes = {m.group(2) for m in _HOLE.finditer(command)}
    if holes - names:
        raise RecipeFileError(f"{where}: the command uses {sorted(holes - names)}, not in args")
    if names - holes:
        raise RecipeFileError(f"{where}: argument(s) {sorted(names - holes)} not in the command")
    said = {m.group(2) for m in _HOLE.finditer(says or "")} - {"output"}
    if said - names:
        raise RecipeFileError(f"{where}: says uses {sorted(said - names)}, not in args")
    return Recipe(name, " ".join(description.split()), command, tuple(args), says, effect, source)
