"""`agent train`: LoRA fine-tuning of the embedded model on exported traces and a curriculum."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from agent.errors import UserError

DEFAULT_HELD_OUT = Path("evals/basic.yaml")


def train(
    data: Annotated[
        list[Path] | None,
        typer.Option("--data", "-d", help="A JSONL file from `agent traces export`; repeatable."),
    ] = None,
    curriculum: Annotated[
        int,
        typer.Option(
            "--curriculum", "-c", min=0, help="Generated tasks solved by their gold calls."
        ),
    ] = 0,
    families: Annotated[
        list[str] | None, typer.Option("--family", help="Only these task families; repeatable.")
    ] = None,
    held_out: Annotated[
        list[Path] | None,
        typer.Option(
            "--held-out",
            help="Suites the curriculum must not contain (default: evals/basic.yaml if present).",
        ),
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Folder for the adapter, manifest and checkpoint.")
    ] = Path("adapter"),
    model: Annotated[
        Path | None, typer.Option("--model", "-m", help="Base GGUF model (default: the bundled).")
    ] = None,
    epochs: Annotated[int, typer.Option("--epochs", min=1, help="Passes over the data.")] = 2,
    rank: Annotated[int, typer.Option("--rank", min=1, help="LoRA rank.")] = 8,
    alpha: Annotated[float, typer.Option("--alpha", min=0.0, help="LoRA alpha.")] = 16.0,
    learning_rate: Annotated[float, typer.Option("--lr", min=0.0, help="Learning rate.")] = 2e-4,
    accumulate: Annotated[
        int, typer.Option("--accumulate", min=1, help="Examples per optimizer step.")
    ] = 4,
    seed: Annotated[int, typer.Option("--seed", help="Seed for the curriculum and order.")] = 0,
    save_every: Annotated[
        int, typer.Option("--save-every", min=0, help="Also checkpoint every N examples (0: off).")
    ] = 0,
) -> None:
    """Train a LoRA adapter (OUT/adapter.gguf, with OUT/manifest.json) on the CPU.

    Examples come from exported traces (--data), from a generated curriculum solved by its
    scripted gold calls (--curriculum N), or both. A checkpoint is written after every epoch;
    run the same command again to resume a run that was stopped.
    """
    from backends.default_model import check_gguf, default_model_path
    from backends.training.examples import read_examples
    from backends.training.trainer import TrainSettings
    from backends.training.trainer import train as run_training

    console = Console(highlight=False)
    base = check_gguf(model) if model else default_model_path()
    examples = list(read_examples(data or []))
    described: dict[str, Any] = {"files": [str(p) for p in data or []]}
    if curriculum:
        gold = _gold_examples(console, curriculum, seed, families, held_out, out)
        examples += gold
        described["curriculum"] = {
            "tasks": curriculum,
            "seed": seed,
            "families": families,
            "examples": len(gold),
        }
    if not examples:
        raise UserError("nothing to train on: pass --data FILE.jsonl or --curriculum N")
    settings = TrainSettings(
        epochs=epochs,
        rank=rank,
        alpha=alpha,
        learning_rate=learning_rate,
        accumulate=accumulate,
        seed=seed,
    )
    with _progress(console) as report:
        result = run_training(
            base, examples, out, settings, described, report, console.print, save_every
        )
    losses = ", ".join(f"{x:.3f}" for x in result.epoch_losses)
    console.print(f"loss per epoch: {losses}")
    console.print(f"adapter written to {result.adapter} ({result.seconds:.0f} s)")
    console.print(f"[dim]use it with --adapter {result.adapter}[/dim]")


def _gold_examples(
    console: Console,
    count: int,
    seed: int,
    families: list[str] | None,
    held_out: list[Path] | None,
    out: Path,
) -> list[dict[str, Any]]:
    """The curriculum's gold runs as chat examples; a gold run that fails its check is a bug."""
    import json

    from cli.config import load_settings
    from cli.evals.generators.curriculum import generate
    from cli.evals.generators.gold import run_gold
    from cli.evals.suite import load_suite

    suites = held_out if held_out is not None else [p for p in [DEFAULT_HELD_OUT] if p.is_file()]
    avoid = [t for path in suites for t in load_suite(path).tasks]
    made = generate(count, seed, families, avoid)
    examples: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="clawloop-gold-") as tmp:
        settings = load_settings({"data_dir": tmp})
        for run in run_gold(made, settings):
            if not run.result.passed:
                raise RuntimeError(f"gold run of {run.result.task} failed: {run.result.failures}")
            examples += run.examples
    out.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(e, ensure_ascii=False, sort_keys=True) for e in examples]
    (out / "curriculum.jsonl").write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    console.print(f"curriculum: {count} tasks, {len(examples)} examples (gold runs all passed)")
    return examples


def _progress(console: Console) -> Any:
    """A context manager yielding a step reporter that drives a rich bar showing the loss."""
    import contextlib

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from backends.training.trainer import StepReport

    @contextlib.contextmanager
    def bar() -> Any:
        columns = (
            TextColumn("epoch {task.fields[epoch]}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]:.4f}"),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=console) as progress:
            tasks: dict[int, Any] = {}

            def report(step: StepReport) -> None:
                if step.epoch not in tasks:
                    tasks[step.epoch] = progress.add_task(
                        "train", total=step.steps, epoch=step.epoch, loss=step.loss
                    )
                progress.update(tasks[step.epoch], completed=step.step, loss=step.loss)

            yield report

    return bar()


__all__ = ["train"]
