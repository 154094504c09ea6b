"""`agent train`: LoRA fine-tuning of the embedded model on exported traces and a curriculum."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from agent.errors import UserError
from cli.console import SafeConsole

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
    self_play: Annotated[
        int,
        typer.Option(
            "--self-play",
            min=0,
            help="Generated tasks the model attempts; only runs that pass are kept.",
        ),
    ] = 0,
    tries: Annotated[int, typer.Option("--tries", min=1, help="Attempts per self-play task.")] = 2,
    temperature: Annotated[
        float, typer.Option("--temperature", min=0.0, help="Sampling temperature for self-play.")
    ] = 0.7,
    backend: Annotated[
        str | None,
        typer.Option("--backend", "-b", help="Backend for self-play (default: the configured)."),
    ] = None,
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", min=1, help="Self-play tasks run at once.")
    ] = 1,
    start_from: Annotated[
        Path | None,
        typer.Option(
            "--start-from",
            help="An earlier run's adapter: self-play samples with it and training starts from it.",
        ),
    ] = None,
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
    scripted gold calls (--curriculum N), from the model's own passing attempts at generated
    tasks (--self-play N), or any mix of them. A checkpoint is written after every epoch;
    run the same command again to resume a run that was stopped.
    """
    from backends.default_model import check_gguf, default_model_path
    from backends.training.examples import read_examples
    from backends.training.trainer import TrainSettings
    from backends.training.trainer import train as run_training

    console = SafeConsole(highlight=False)
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
    if start_from is not None:
        from backends.lora_gguf import check_adapter
        from backends.training.trainer import file_sha256

        start_from = check_adapter(start_from)
        described["start_from"] = {"path": str(start_from), "sha256": file_sha256(start_from)}
    if self_play:
        sampled, summary = _self_play_examples(
            console,
            SelfPlay(self_play, tries, temperature, backend, jobs, start_from),
            seed,
            families,
            held_out,
            out,
        )
        examples += sampled
        described["self_play"] = summary
    if not examples:
        raise UserError(
            "nothing to train on: pass --data FILE.jsonl, --curriculum N or --self-play N"
        )
    settings = TrainSettings(
        epochs=epochs,
        rank=rank,
        alpha=alpha,
        learning_rate=learning_rate,
        accumulate=accumulate,
        seed=seed,
        start_from=str(start_from) if start_from is not None else None,
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

    made = generate(count, seed, families, _held_out_tasks(held_out))
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


@dataclass(slots=True)
class SelfPlay:
    """How the model attempts generated tasks for rejection sampling."""

    tasks: int
    tries: int
    temperature: float
    backend: str | None
    jobs: int
    adapter: Path | None


# Self-play tasks are drawn from their own stream, so a round never repeats the gold tasks.
SELF_PLAY_SEED = 7919


def _self_play_examples(
    console: Console,
    plan: SelfPlay,
    seed: int,
    families: list[str] | None,
    held_out: list[Path] | None,
    out: Path,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The passing runs of the model's own attempts, as chat examples, and a summary."""
    import json

    from cli.config import load_settings
    from cli.evals.generators.curriculum import generate
    from cli.evals.generators.selfplay import SampledTask, sample
    from cli.wiring import build_backend

    made = generate(plan.tasks, seed + SELF_PLAY_SEED, families, _held_out_tasks(held_out))
    settings = load_settings(
        {
            "data_dir": str(out / "self-play"),
            "backend": plan.backend,
            "adapter": str(plan.adapter) if plan.adapter else "none",
            "decoding.temperature": plan.temperature,
        }
    )
    console.print(
        f"self-play: {plan.tasks} tasks, up to {plan.tries} tries each at temperature "
        f"{plan.temperature:g} on {settings.backend}"
        + (f" with {plan.adapter}" if plan.adapter else "")
    )
    passed: dict[str, list[int]] = {}

    def progress(outcome: SampledTask) -> None:
        tally = passed.setdefault(outcome.family, [0, 0])
        tally[0] += outcome.passed
        tally[1] += 1
        mark = "[green]pass[/green]" if outcome.passed else "[red]fail[/red]"
        console.print(f"  {mark} {outcome.task} ({len(outcome.tries)} tries)")

    outcomes = sample(made, settings, build_backend(settings), plan.tries, plan.jobs, progress)
    examples = [e for o in outcomes for e in o.examples]
    out.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(e, ensure_ascii=False, sort_keys=True) for e in examples]
    (out / "self-play.jsonl").write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    kept = sum(o.passed for o in outcomes)
    console.print(f"self-play: {kept}/{len(outcomes)} tasks passed, {len(examples)} examples kept")
    summary = {
        "tasks": plan.tasks,
        "tries": plan.tries,
        "temperature": plan.temperature,
        "backend": settings.backend,
        "seed": seed + SELF_PLAY_SEED,
        "passed": kept,
        "examples": len(examples),
        "per_family": {f: {"passed": p, "tasks": n} for f, (p, n) in sorted(passed.items())},
    }
    return examples, summary


def _held_out_tasks(held_out: list[Path] | None) -> list[Any]:
    """The tasks of the held-out suites (default: evals/basic.yaml where it exists)."""
    from cli.evals.suite import load_suite

    suites = held_out if held_out is not None else [p for p in [DEFAULT_HELD_OUT] if p.is_file()]
    return [t for path in suites for t in load_suite(path).tasks]


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
