"""``agent engine``: commands about the bundled paged engine."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from cli.console import SafeConsole

engine_app = typer.Typer(
    help="The bundled paged engine: plan how much KV cache fits; stop resident engines."
)


@engine_app.callback()
def _engine() -> None:
    """The bundled paged engine."""  # a callback keeps `plan` a subcommand when it stands alone


@engine_app.command()
def plan(
    model: Annotated[
        str | None, typer.Argument(help="A .gguf file or a Hugging Face folder (default: bundled)")
    ] = None,
    memory: Annotated[str, typer.Option(help="Memory for weights + KV cache, e.g. 8GiB")] = "8GiB",
    dtype: Annotated[
        str, typer.Option(help="Weights and KV-cache dtype: bf16, f16 or f32")
    ] = "bf16",
    block_size: Annotated[int, typer.Option(help="Tokens per KV-cache block")] = 16,
    max_len: Annotated[
        int | None, typer.Option(help="Sequence length to count (default: the model's context)")
    ] = None,
) -> None:
    """Print KV bytes per token and how many tokens, blocks and sequences fit in --memory."""
    from backends.engine.config import read_config
    from backends.engine.plan import (
        DTYPE_BYTES,
        format_bytes,
        parse_dtype,
        parse_size,
        plan_memory,
        weight_parameters,
    )
    from backends.gguf.default_model import default_model_path

    path = Path(model).expanduser() if model else default_model_path()
    config = read_config(path)
    name = parse_dtype(dtype)
    params = weight_parameters(path)
    weights = (params or 0) * DTYPE_BYTES[name]
    result = plan_memory(config, weights, parse_size(memory), name, block_size, max_len)

    table = Table(title=f"KV-cache plan for {path.name}", show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    shape = f"{config.num_layers} layers × {config.num_kv_heads} KV heads × {config.head_dim}"
    table.add_row("shape", f"{config.architecture}, {shape}")
    table.add_row("KV per token", f"{format_bytes(result.kv_bytes_per_token)} ({name})")
    weights_note = f"{params:,} parameters" if params is not None else "no weight files found"
    table.add_row("weights", f"{format_bytes(weights)} ({weights_note})")
    table.add_row("memory", format_bytes(result.memory_bytes))
    table.add_row("KV budget", format_bytes(result.kv_budget_bytes))
    table.add_row("block", f"{result.block_size} tokens = {format_bytes(result.block_bytes)}")
    table.add_row("blocks", f"{result.num_blocks:,}")
    table.add_row("tokens", f"{result.num_tokens:,}")
    table.add_row(f"sequences of {result.max_len:,} tokens", f"{result.concurrent_sequences:,}")
    SafeConsole().print(table)


@engine_app.command()
def stop() -> None:
    """Stop the resident engines that keep the model loaded between runs (keep_alive)."""
    from backends.engine.resident.client import stop_hosts

    stopped = stop_hosts()
    if stopped:
        typer.echo(f"stopped {len(stopped)} resident engine(s): pid {', '.join(map(str, stopped))}")
    else:
        typer.echo("no resident engine is running")
