"""`agent train`: LoRA fine-tuning of the embedded model on traces, a curriculum, its own
attempts and a teacher's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from agent.errors import UserError
from cli.console import SafeConsole


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
            help="An earlier run's adapter: self-play samples with it and training starts from "
            "it (none: a fresh LoRA; with --from-traces the default is the current adapter).",
        ),
    ] = None,
    teacher: Annotated[
        str | None,
        typer.Option(
            "--teacher",
            help="A backend (openai: any OpenAI-compatible server) that attempts tasks; its "
            "passing runs are kept.",
        ),
    ] = None,
    teacher_tasks: Annotated[
        int, typer.Option("--teacher-tasks", min=0, help="Generated tasks for the teacher.")
    ] = 0,
    teacher_suite: Annotated[
        Path | None,
        typer.Option("--teacher-suite", help="A suite (not held out) for the teacher to solve."),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option("--base-url", help="The teacher's server URL, e.g. http://host:8000/v1."),
    ] = None,
    teacher_model: Annotated[
        str | None, typer.Option("--teacher-model", help="The teacher's model name.")
    ] = None,
    from_traces: Annotated[
        bool,
        typer.Option("--from-traces", help="Train on the graded-good traces in the traces folder."),
    ] = False,
    since: Annotated[
        str | None,
        typer.Option(
            "--since", help="With --from-traces: runs started since 2026-05-01, or 3d, 12h."
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

    Examples come from exported traces (--data), from the graded-good traces in the traces
    folder (--from-traces), from a generated curriculum solved by its scripted gold calls
    (--curriculum N), from the model's own passing attempts at generated tasks (--self-play
    N), from a stronger model's passing attempts (--teacher openai), or any mix of them. A
    checkpoint is written after every epoch; run the same command again to resume a run that
    was stopped.
    """
    from backends.gguf.default_model import check_gguf, default_model_path
    from backends.training.examples import read_examples
    from backends.training.trainer import TrainSettings
    from backends.training.trainer import train as run_training

    console = SafeConsole(highlight=False)
    base = check_gguf(model) if model else default_model_path()
    described: dict[str, Any] = {}
    data = list(data or [])
    if from_traces:
        found, described["traces"] = _traces(console, families, since, out)
        data.append(found)
        if start_from is None:
            start_from = _current_adapter(base)
    elif since is not None:
        raise UserError("--since picks traces: use it with --from-traces")
    examples = list(read_examples(data))
    described["files"] = [str(p) for p in data]
    if curriculum:
        from cli.evals.generators.curriculum import generate
        from cli.train_sources import gold_examples, held_out_tasks

        made = generate(curriculum, seed, _generated(families), held_out_tasks(held_out))
        gold, summary = gold_examples(console, made, out)
        examples += gold
        described["curriculum"] = {
            "tasks": curriculum,
            "seed": seed,
            "families": families,
            "examples": len(gold),
            **({"shots": summary["shots"]} if "shots" in summary else {}),
        }
    if start_from is not None and str(start_from) == "none":
        start_from = None
    if start_from is not None:
        from backends.gguf.lora import check_adapter
        from backends.training.trainer import file_sha256

        start_from = check_adapter(start_from)
        described["start_from"] = {"path": str(start_from), "sha256": file_sha256(start_from)}
    if self_play:
        plan = SelfPlay(self_play, tries, temperature, backend, jobs, start_from)
        sampled, described["self_play"] = _self_play(console, plan, seed, families, held_out, out)
        examples += sampled
    if teacher is not None:
        plan_t = Teacher(teacher, teacher_tasks, teacher_suite, base_url, teacher_model, jobs)
        taught, described["teacher"] = _teacher(console, plan_t, seed, families, held_out, out)
        examples += taught
    elif teacher_tasks or teacher_suite or base_url or teacher_model:
        raise UserError("--teacher-tasks, --teacher-suite and --base-url need --teacher openai")
    if not examples:
        raise UserError(
            "nothing to train on: pass --data FILE.jsonl, --curriculum N, --self-play N, "
            "--teacher openai or --from-traces"
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


def _generated(families: list[str] | None) -> list[str]:
    """The families generated tasks are drawn from. Those whose gold is a `run_command` line
    need it offered, or command recipes in its place: a model's attempt may solve such a task
    with a recipe, and a gold run searches the offered tools for one that does."""
    from cli.config import load_settings
    from cli.evals.generators.curriculum import trainable

    small = load_settings().small
    return trainable(families, small.command_tool or small.recipes)


def _traces(
    console: Console, families: list[str] | None, since: str | None, out: Path
) -> tuple[Path, dict[str, Any]]:
    """The graded-good traces of the traces folder, as a data file in ``out``."""
    from cli.config import load_settings
    from cli.train_sources import trace_examples

    return trace_examples(console, load_settings().traces_dir, families, since, out)


def _current_adapter(base: Path) -> Path | None:
    """The adapter the model runs with now: the configured one, else the shipped one for the
    bundled model; ``none`` in the config means none."""
    from backends.gguf.default_model import default_adapter
    from backends.gguf.lora import adapter_path
    from cli.config import load_settings

    return adapter_path(load_settings().adapter, default_adapter(base))


@dataclass(slots=True)
class SelfPlay:
    """How the model attempts generated tasks for rejection sampling."""

    tasks: int
    tries: int
    temperature: float
    backend: str | None
    jobs: int
    adapter: Path | None


def _self_play(
    console: Console,
    plan: SelfPlay,
    seed: int,
    families: list[str] | None,
    held_out: list[Path] | None,
    out: Path,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The passing runs of the model's own attempts, as chat examples, and a summary."""
    from cli.config import load_settings
    from cli.evals.generators.curriculum import generate
    from cli.train_sources import SELF_PLAY_SEED, Sampling, held_out_tasks, sampled_examples
    from cli.wiring import build_backend

    made = generate(
        plan.tasks, seed + SELF_PLAY_SEED, _generated(families), held_out_tasks(held_out)
    )
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
    sampling = Sampling("self-play", build_backend(settings), settings, plan.tries, plan.jobs)
    examples, summary = sampled_examples(console, sampling, made, out)
    summary |= {"temperature": plan.temperature, "seed": seed + SELF_PLAY_SEED}
    return examples, summary


@dataclass(slots=True)
class Teacher:
    """A stronger model behind a backend, and the tasks it attempts for distillation."""

    backend: str
    tasks: int
    suite: Path | None
    base_url: str | None
    model: str | None
    jobs: int


def _teacher(
    console: Console,
    plan: Teacher,
    seed: int,
    families: list[str] | None,
    held_out: list[Path] | None,
    out: Path,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The teacher's passing runs (one try each, in the small-model profile), and a summary
    naming the teacher's server and model."""
    from cli.config import load_settings
    from cli.evals.generators.curriculum import generate
    from cli.train_sources import (
        TEACHER_SEED,
        Sampling,
        held_out_tasks,
        sampled_examples,
        teacher_suite,
    )
    from cli.wiring import build_backend

    if (plan.tasks > 0) == (plan.suite is not None):
        raise UserError("--teacher needs one of --teacher-tasks N or --teacher-suite SUITE.yaml")
    tasks: Any
    if plan.suite is not None:
        tasks = teacher_suite(plan.suite, families, held_out)
    else:
        tasks = generate(
            plan.tasks, seed + TEACHER_SEED, _generated(families), held_out_tasks(held_out)
        )
    overrides = {
        "data_dir": str(out / "teacher"),
        "backend": plan.backend,
        f"backends.{plan.backend}.base_url": plan.base_url,
        f"backends.{plan.backend}.model": plan.model,
    }
    settings = load_settings(overrides)
    teacher = build_backend(settings)
    where = getattr(teacher, "base_url", None)
    console.print(f"teacher: {plan.backend}" + (f" at {where}" if where else ""))
    sampling = Sampling("teacher", teacher, settings, 1, plan.jobs)
    examples, summary = sampled_examples(console, sampling, tasks, out)
    summary |= {
        "base_url": where,
        "model": getattr(teacher, "model", None),
        "suite": str(plan.suite) if plan.suite else None,
        "seed": None if plan.suite else seed + TEACHER_SEED,
    }
    return examples, summary


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
