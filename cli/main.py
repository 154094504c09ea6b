"""The `agent` command: its commands are listed here, each imported only when it is used;
errors for the user are rendered once."""

from __future__ import annotations

import os
import sys

import typer

from agent.errors import UserError
from cli.lazy_group import LazyCommand, LazyGroup

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100, "terminal_width": 100}

# In the order `agent --help` lists them: single commands first, then the groups. Each summary
# is the first paragraph of the command's help (tests/cli/test_lazy_commands.py checks them).
COMMANDS = (
    LazyCommand(
        "run",
        "cli.run_cmd:run",
        "Run one task to a final answer. Exit code 0 on a final answer, 1 otherwise.",
    ),
    LazyCommand(
        "chat",
        "cli.run_cmd:chat",
        "Talk with the agent; the conversation is kept as a session. "
        "Type /exit or Ctrl-D to leave.",
    ),
    LazyCommand(
        "models",
        "cli.models_cmd:models",
        "Show the configured backend and model, the default model file, its size and architecture.",
    ),
    LazyCommand(
        "serve",
        "cli.serve_cmd:serve",
        "Serve the bundled engine as an OpenAI-compatible API (/v1/chat/completions and more).",
    ),
    LazyCommand(
        "audit",
        "cli.audit_cmd:audit",
        "Show recent tool calls with their decisions (from the audit log).",
    ),
    LazyCommand(
        "eval",
        "cli.eval_cmd:evaluate",
        "Run every task of a suite in a fresh workspace and report the success rate per variant.",
    ),
    LazyCommand(
        "doctor",
        "cli.doctor_cmd:doctor",
        "Check what the sandbox enforces on this machine, and what it cannot.",
    ),
    LazyCommand(
        "gateway",
        "cli.gateway_cmd:gateway",
        "Run the chat bots (Telegram, Discord) in the foreground until SIGINT or SIGTERM.",
    ),
    LazyCommand(
        "train",
        "cli.train_cmd:train",
        "Train a LoRA adapter (OUT/adapter.gguf, with OUT/manifest.json) on the CPU.",
    ),
    LazyCommand(
        "usage",
        "cli.usage_cmd:usage",
        "Tokens, steps, time and cost of past runs, read from their traces.",
    ),
    LazyCommand(
        "web",
        "cli.web_cmd:web",
        "Serve a local web page: chat, approve tool calls, read traces, eval runs and status.",
    ),
    # The search module adds `sessions search` to the group of cli/sessions_cmd.py.
    LazyCommand(
        "sessions",
        "cli.sessions_search_cmd:sessions_app",
        "List, show and remove saved sessions.",
    ),
    LazyCommand(
        "config",
        "cli.config_cmd:config_app",
        "Where the config file is and what it holds.",
    ),
    LazyCommand(
        "tools",
        "cli.tools_cmd:tools_app",
        "List the agent's tools, or call one by hand.",
    ),
    LazyCommand(
        "skills",
        "cli.skills_cmd:skills_app",
        "Installed skills: list, info, install, approve, remove, check.",
    ),
    LazyCommand(
        "engine",
        "cli.engine_cmd:engine_app",
        "The bundled paged engine: plan how much KV cache fits; stop resident engines.",
    ),
    LazyCommand(
        "traces",
        "cli.traces_cmd:traces_app",
        "Traces of past runs: list, show, grade, fix, export.",
    ),
    LazyCommand(
        "pairing",
        "cli.pairing_cmd:pairing_app",
        "Pair chat users with the bots: list codes, approve or deny them, revoke users.",
    ),
    LazyCommand(
        "cron",
        "cli.cron_cmd:cron_app",
        "Scheduled jobs: a prompt run on a schedule, its answer sent to a chat or printed.",
    ),
    LazyCommand(
        "memory",
        "cli.memory_cmd:memory_app",
        "Show, edit and forget what the assistant remembers.",
    ),
)


class AgentGroup(LazyGroup):
    """The top-level group: every command of :data:`COMMANDS`."""

    lazy = COMMANDS


app = typer.Typer(
    name="agent",
    cls=AgentGroup,
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


@app.callback()
def _group() -> None:
    # Typer builds a group only for an app with commands or a callback; the commands are
    # mounted by AgentGroup as they are asked for, so this callback stands in. It does nothing.
    pass


def main() -> None:
    """Entry point: run the app; a UserError becomes one line on stderr and exit code 2."""
    from agent.host import bound_spin_waits
    from cli.console import install_safe_logging
    from cli.fast_exit import finish

    bound_spin_waits()  # before any command loads an OpenMP runtime, and for the engine's host
    install_safe_logging()
    try:
        app()
    except SystemExit as done:
        finish(done.code)
    except UserError as exc:
        if os.environ.get("CLAWLOOP_DEBUG"):
            raise
        from rich.markup import escape

        from cli.console import SafeConsole

        SafeConsole(stderr=True, highlight=False).print(
            f"[red]error:[/red] {escape(exc.message)}", soft_wrap=True
        )
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
