"""``agent serve``: the bundled engine behind an OpenAI-compatible HTTP API."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agent.errors import UserError
from cli.console import SafeConsole

if TYPE_CHECKING:
    from backends.engine.serve.requests import DraftDefaults
    from cli.config import Settings

SERVE_INSTALL_HINT = "pip install 'clawloop[serve]'"
API_KEY_ENV = "CLAWLOOP_SERVE_API_KEY"

err_console = SafeConsole(stderr=True, highlight=False)


def serve(
    model: Annotated[
        str | None,
        typer.Option(
            "--model", "-m", help="A .gguf file or Hugging Face folder (default: bundled)."
        ),
    ] = None,
    host: Annotated[
        str, typer.Option(help="Address to listen on (beyond loopback, also pass --api-key).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port.")] = 8000,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key", help=f"Require 'Authorization: Bearer KEY' (or set ${API_KEY_ENV})."
        ),
    ] = None,
    adapter: Annotated[
        str | None,
        typer.Option("--adapter", help="A GGUF LoRA adapter (none: off; default: the config's)."),
    ] = None,
) -> None:
    """Serve the bundled engine as an OpenAI-compatible API (/v1/chat/completions and more).

    Engine settings (weights, max_num_seqs, kv_cache_bytes, block_size, ...) come from the
    config file's [backends.engine] table; the adapter from --adapter or the config's adapter,
    as for agent run (unset, the bundled model runs with its shipped adapter).
    """
    try:
        import uvicorn

        from backends.engine.serve.app import Server
    except ImportError as exc:
        raise UserError(f"agent serve needs {exc.name}: run {SERVE_INSTALL_HINT}") from None
    from backends.engine.backend import load_engine
    from cli.config import load_settings

    key = api_key or os.environ.get(API_KEY_ENV) or None
    if not _is_loopback(host) and key is None:
        err_console.print(
            f"[bold red]listening on {host} without --api-key: anyone who can reach this "
            "address can use the model[/bold red]"
        )
    config = load_settings()
    options = config.backends.get("engine")
    settings = options.model_dump(exclude_none=True) if options else {}
    settings.pop("model", None)
    # The adapter as `agent run` takes it: the flag, else the config's (or CLAWLOOP_ADAPTER),
    # else the engine table's; unset, load_engine gives the bundled model its shipped adapter.
    in_table = settings.pop("adapter", None)
    chosen = adapter or config.adapter or in_table
    # A server is one long-running process whose prefix cache stays warm in memory: the disk
    # cache would only add a copy of every new prompt's blocks to the step loop (unless asked).
    settings.setdefault("disk_cache", False)
    path = served_model(model, config)
    loaded = load_engine(path, chosen, **settings)
    model_id = _model_id(loaded.path)
    drafts = _draft_defaults(settings.get("num_speculative_tokens"), loaded.device)
    server = Server(loaded, model_id, key, drafts)
    runner: Any = loaded.engine.runner  # the model runner, which knows its weights
    lora = "no adapter"
    if loaded.adapter is not None:
        lora = f"adapter {loaded.adapter.name} (--adapter none: off)"
    err_console.print(
        f"serving {model_id} on http://{host}:{port}/v1 "
        f"(context {loaded.engine.max_model_len} tokens, weights {runner.weights}, {lora}"
        f", {drafts.under_grammar} drafted tokens per step under a grammar"
        f", {drafts.plain} otherwise"
        f"{', key required' if key else ''})"
    )
    try:
        uvicorn.run(server.app(), host=host, port=port, log_level="warning", access_log=False)
    finally:
        loaded.engine.close()


def _draft_defaults(configured: int | None, device: str) -> DraftDefaults:
    """Drafts for requests that do not ask: the config's ``num_speculative_tokens`` for all of
    them where set; unset, the engine's default (3 on the CPU) under a grammar, where most of
    what is drafted is text the grammar forces and drafts paid at every batch width measured,
    and none for plain text, where a wide batch of failed guesses would cost compute."""
    from backends.engine.config import EngineSettings
    from backends.engine.serve.requests import DraftDefaults

    if configured is not None:
        return DraftDefaults(configured, configured)
    return DraftDefaults(EngineSettings().speculation_on(device), 0)


def served_model(flag: str | None, config: Settings) -> str | None:
    """The model file `agent serve` loads, as `agent run -b engine` would: the flag, else the
    config's ``model`` (or CLAWLOOP_MODEL) when the configured backend is the engine (for
    another backend it names that backend's model), else the engine table's; None: bundled."""
    if flag:
        return flag
    if config.backend == "engine" and config.model:
        return config.model
    options = config.backends.get("engine")
    return options.model if options else None


def _model_id(path: Path) -> str:
    return path.stem if path.is_file() else path.name


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
