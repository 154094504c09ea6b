"""Command-line options that several commands take, written once so their help reads the same."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

BackendOpt = Annotated[
    str | None,
    typer.Option("--backend", "-b", help="Backend: llamacpp, engine, openai, fake, or a plugin's."),
]
ScriptOpt = Annotated[
    Path | None,
    typer.Option(
        "--script", help="JSON file of scripted assistant turns (implies --backend fake)."
    ),
]
WorkspaceOpt = Annotated[
    Path | None,
    typer.Option(
        "--workspace", "-w", help="Folder the tools work in (default: the current folder)."
    ),
]
SandboxOpt = Annotated[
    str | None,
    typer.Option(
        "--sandbox",
        help="OS sandbox: bwrap (default) or off (no isolation: only when you mean it).",
    ),
]
