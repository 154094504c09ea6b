"""A command group that imports a command's module only when that command is used.

`agent run` then loads the run's own files and not those of the twenty other commands, and
`agent --help` loads none: the listing's one-line summaries are written next to the command
names, and a test checks that each one still matches its command's own help.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, ClassVar

import typer
from typer.core import TyperCommand, TyperGroup


@dataclass(frozen=True, slots=True)
class LazyCommand:
    """A command by name, where it lives (``"module:attribute"``: a function or a Typer app),
    and the first paragraph of its help, from which ``--help`` makes the listing's line."""

    name: str
    target: str
    summary: str

    def load(self, rich_markup_mode: Any) -> Any:
        """Import the command's module; its click command, built as ``add_typer`` or
        ``command`` on the parent app would build it."""
        module_name, attribute = self.target.split(":")
        target = getattr(importlib.import_module(module_name), attribute)
        holder = typer.Typer(rich_markup_mode=rich_markup_mode, add_completion=False)
        if isinstance(target, typer.Typer):
            holder.add_typer(target, name=self.name)
            return typer.main.get_group(holder).commands[self.name]
        holder.command(self.name)(target)
        return typer.main.get_command(holder)


class LazyGroup(TyperGroup):
    """A Typer group whose subcommands are the :attr:`lazy` entries, listed in that order."""

    lazy: ClassVar[tuple[LazyCommand, ...]] = ()

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self._entries = {entry.name: entry for entry in self.lazy}
        self._listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return [*self.commands, *(name for name in self._entries if name not in self.commands)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        entry = self._entries.get(cmd_name)
        if cmd_name in self.commands or entry is None:
            return self.commands.get(cmd_name)
        if self._listing:  # a line of the listing: the summary is all it needs
            return TyperCommand(name=cmd_name, help=entry.summary)
        self.commands[cmd_name] = entry.load(self.rich_markup_mode)
        return self.commands[cmd_name]

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            self._listing = False

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] not in self.list_commands(ctx):
            # A mistyped name: the error offers the closest of the loaded names, so load all.
            for name in self._entries:
                self.get_command(ctx, name)
        return super().resolve_command(ctx, args)
