"""Generates docs/cli.md, the `--help` reference, from the CLI itself (`python -m cli.docgen`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

HEADER = (
    "# `agent` command reference\n\n"
    "Generated from the CLI by `python -m cli.docgen`; a test checks it matches. "
    "Do not edit by hand.\n"
)


def _walk(command: Any, ctx: typer.Context, path: list[str]) -> list[str]:
    name = " ".join(path)
    text = command.get_help(ctx).rstrip()
    parts = [f"\n## `{name}`\n\n```\n{text}\n```\n"]
    if hasattr(command, "list_commands"):  # a group (typer ships its own click)
        for sub_name in command.list_commands(ctx):
            sub = command.get_command(ctx, sub_name)
            if sub is None or sub.hidden:
                continue
            sub_ctx = typer.Context(
                sub, info_name=sub_name, parent=ctx, max_content_width=100, terminal_width=100
            )
            parts.extend(_walk(sub, sub_ctx, [*path, sub_name]))
    return parts


def render() -> str:
    """The whole reference as markdown."""
    from cli.main import app

    command = typer.main.get_command(app)
    ctx = typer.Context(command, info_name="agent", max_content_width=100, terminal_width=100)
    return HEADER + "".join(_walk(command, ctx, ["agent"]))


def main() -> None:
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/cli.md")
    target.write_text(render(), encoding="utf-8")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
