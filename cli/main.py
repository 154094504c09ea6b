"""The `agent` command: its groups are mounted here; errors for the user are rendered once."""

from __future__ import annotations

import os
import sys

import typer
from rich.markup import escape

from agent.errors import UserError
from cli import run_cmd, serve_cmd
from cli.config import config_path
from cli.console import SafeConsole
from cli.models_cmd import models
from cli.sessions_cmd import sessions_app

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100, "terminal_width": 100}

app = typer.Typer(
    name="agent",
    help=(
        "clawloop: a command-line agent runtime. "
        "A model calls tools in a sandbox until the task is done."
    ),
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings=CONTEXT,
    add_completion=False,
)
app.command()(run_cmd.run)
app.command()(run_cmd.chat)
app.command()(models)
app.command()(serve_cmd.serve)
app.add_typer(sessions_app, name="sessions")

config_app = typer.Typer(help="Where the config file is and what it holds.", no_args_is_help=True)
app.add_typer(config_app, name="config")


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


def _mount_optional_groups() -> None:
    """Groups whose modules depend on other packages' files."""
    from cli.audit_cmd import audit
    from cli.cron_cmd import cron_app
    from cli.doctor_cmd import doctor
    from cli.engine_cmd import engine_app
    from cli.eval_cmd import evaluate
    from cli.gateway_cmd import gateway
    from cli.memory_cmd import memory_app
    from cli.pairing_cmd import pairing_app
    from cli.sessions_search_cmd import search as _sessions_search  # noqa: F401 (registers)
    from cli.skills_cmd import skills_app
    from cli.tools_cmd import tools_app
    from cli.traces_cmd import traces_app
    from cli.train_cmd import train
    from cli.usage_cmd import usage
    from cli.web_cmd import web

    app.add_typer(tools_app, name="tools")
    app.add_typer(skills_app, name="skills")
    app.command("audit")(audit)
    app.add_typer(engine_app, name="engine")
    app.command("eval")(evaluate)
    app.add_typer(traces_app, name="traces")
    app.command("doctor")(doctor)
    app.command("gateway")(gateway)
    app.add_typer(pairing_app, name="pairing")
    app.add_typer(cron_app, name="cron")

    app.add_typer(memory_app, name="memory")
    app.command("train")(train)
    app.command("usage")(usage)
    app.command("web")(web)


_mount_optional_groups()


def main() -> None:
    """Entry point: run the app; a UserError becomes one line on stderr and exit code 2."""
    from cli.console import install_safe_logging
    from cli.fast_exit import finish

    install_safe_logging()
    try:
        app()
    except SystemExit as done:
        finish(done.code)
    except UserError as exc:
        if os.environ.get("CLAWLOOP_DEBUG"):
            raise
        SafeConsole(stderr=True, highlight=False).print(
            f"[red]error:[/red] {escape(exc.message)}", soft_wrap=True
        )
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
