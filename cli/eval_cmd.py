"""`agent eval SUITE.yaml`: run a task suite and report success with its interval, per variant."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.config import load_settings
from cli.console import SafeConsole
from cli.evals.report import dump_json, print_table, to_json, write_plot
from cli.evals.runner import TaskResult, Variant, run_suite
from cli.evals.store import reports_dir, save_report
from cli.evals.suite import load_suite
from cli.wiring import build_backend


def evaluate(
    suite_path: Annotated[Path, typer.Argument(metavar="SUITE", help="A suite YAML file.")],
    prompt: Annotated[
        list[str] | None,
        typer.Option("--prompt", "-p", help="A prompt id or .md file; repeat to compare variants."),
    ] = None,
    backend: Annotated[
        str | None, typer.Option("--backend", "-b", help="Backend (default: the configured one).")
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Model for the backend.")
    ] = None,
    adapter: Annotated[
        str | None, typer.Option("--adapter", help="A GGUF LoRA adapter (none: off).")
    ] = None,
    repeat: Annotated[int, typer.Option("--repeat", min=1, help="Runs of each task.")] = 1,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Tasks run at once.")] = 1,
    only: Annotated[
        list[str] | None, typer.Option("--task", "-k", help="Run only tasks whose id has this.")
    ] = None,
    temperature: Annotated[
        float | None, typer.Option("--temperature", min=0.0, help="Sampling temperature.")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write a bar chart of the results (PNG).")
    ] = None,
) -> None:
    """Run every task of a suite in a fresh workspace and report the success rate per variant.

    Tasks run through the real loop, skills and sandbox; calls that would ask are approved,
    since each workspace is a temporary folder. Each run leaves a trace graded by its check,
    and the report is kept in the data folder's evals/ (the web page's /evals shows it).
    """
    suite = load_suite(suite_path)
    if only:
        suite.tasks = [t for t in suite.tasks if any(k in t.id for k in only)]
        if not suite.tasks:
            raise typer.BadParameter("no task id matches --task", param_hint="--task")
    base = load_settings(
        {
            "backend": backend,
            "model": model,
            "adapter": adapter,
            "decoding.temperature": temperature,
            # A suite measures the model, the same for everyone: the user's memory stays out.
            "memory.enabled": False,
        }
    )
    variants = []
    for name in prompt or [base.prompt_name]:
        settings = base.model_copy(update={"prompt": name})
        variants.append(Variant(name, settings, build_backend(settings)))
    console = SafeConsole(stderr=json_out, highlight=False)
    total = len(suite.tasks) * repeat * len(variants)
    done = 0

    def progress(result: TaskResult) -> None:
        nonlocal done
        done += 1
        mark = "[green]pass[/green]" if result.passed else "[red]fail[/red]"
        why = "" if result.passed else f"  [dim]{'; '.join(result.failures)[:120]}[/dim]"
        console.print(
            f"[dim]{done:>3}/{total}[/dim] {mark} {result.variant} {result.task}"
            f" [dim]({result.steps} steps, {result.seconds:.1f} s)[/dim]{why}"
        )

    run_suite(suite, variants, repeat=repeat, jobs=jobs, progress=progress)
    report = to_json(suite.name, variants)
    if json_out:
        typer.echo(dump_json(report))
    else:
        print_table(console, suite.name, variants)
    try:
        kept = f"report kept in {save_report(reports_dir(base.data_dir), report)}"
    except OSError as exc:  # the results are printed already: only the kept copy is lost
        kept = f"report not kept: {exc}"
    console.print(kept, style="dim", markup=False, soft_wrap=True)
    if plot is not None:
        write_plot(plot, suite.name, variants)
        console.print(f"[dim]plot written to {plot}[/dim]")


__all__ = ["evaluate"]
