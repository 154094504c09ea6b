"""`agent models`: what is configured, and where the default model file is."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from agent.errors import UserError
from backends.gguf.default_model import default_model_path
from cli.config import load_settings
from cli.console import SafeConsole
from cli.wiring import backend_factories

console = SafeConsole(highlight=False)


def models() -> None:
    """Show the configured backend and model, the default model file, its size and architecture."""
    from backends.gguf.model_info import describe_model

    settings = load_settings()
    table = Table(show_header=False, box=None)
    table.add_row("backend", settings.backend)
    table.add_row("backends available", ", ".join(sorted(backend_factories())))
    configured = settings.backend_options().get("model")
    try:
        default: Path | None = default_model_path()
    except UserError as exc:
        default = None
        table.add_row("default model", f"[yellow]{exc.message}[/yellow]")
    if default is not None:
        table.add_row("default model", str(default))
    table.add_row("configured model", configured or "(the default)")
    target = (
        Path(configured).expanduser() if configured and configured.endswith(".gguf") else default
    )
    if target is not None and target.exists():
        for key, value in describe_model(target).items():
            table.add_row(f"  {key}", str(value))
    console.print(table)
