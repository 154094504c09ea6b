"""`agent config`: where the config file is and what it holds."""

from __future__ import annotations

import os

import typer

from cli.config import config_path

config_app = typer.Typer(help="Where the config file is and what it holds.", no_args_is_help=True)


@config_app.command("path")
def show_config_path() -> None:
    """Print the config file's path ($CLAWLOOP_CONFIG overrides it)."""
    typer.echo(str(config_path()))


@config_app.command("show")
def show_config() -> None:
    """Print the settings in effect (defaults, file, environment merged), secrets redacted."""
    from cli.config import load_settings
    from sandbox.secrets import Redactor, find_secrets

    settings = load_settings()
    redactor = Redactor(find_secrets(settings.model_dump(), os.environ))
    typer.echo(redactor.redact(settings.model_dump_json(indent=2)))
