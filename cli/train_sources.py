"""Where `agent train` gets its examples: gold runs of a generated curriculum, the model's own
passing attempts (self-play), a teacher model's passing attempts (distillation), and the
graded-good traces of past runs. Each source writes what it found to a JSONL file in the output
folder and says in a summary (for the manifest) what it did."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from agent.errors import UserError
from cli.evals.generators.curriculum import Curriculum
from cli.evals.suite import Suite, Task

# The suite the developers' figure is measured on, in the checkout clawloop runs from (wherever
# the command is started); an installed package without it holds nothing out by default.
DEFAULT_HELD_OUT = Path(__file__).resolve().parents[1] / "evals" / "basic.yaml"
# Self-play and teacher tasks are drawn from streams of their own, so a round never repeats
# the gold tasks of the same seed, nor each other's.
SELF_PLAY_SEED = 7919
TEACHER_SEED = 104729


def write_jsonl(path: Path, examples: list[dict[str, Any]]) -> None:
    """Write examples one per line (the folder is made if needed), keys in their own order:
    the chat template renders tool schemas as written, and training must see what runs see."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(e, ensure_ascii=False) for e in examples]
    path.write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")


def held_out_suites(held_out: list[Path] | None) -> list[Path]:
    """The held-out suites: those given, else evals/basic.yaml where it exists."""
    return held_out if held_out is not None else [p for p in [DEFAULT_HELD_OUT] if p.is_file()]


def held_out_tasks(held_out: list[Path] | None) -> list[Task]:
    """The tasks of the held-out suites."""
    from cli.evals.suite import load_suite

    return [t for path in held_out_suites(held_out) for t in load_suite(path).tasks]


def gold_examples(
    console: Console, made: Curriculum, out: Path
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The curriculum's gold runs as chat examples; a gold run that fails its check is a bug."""
    from cli.config import load_settings
    from cli.evals.generators.gold import run_gold

    examples: list[dict[str, Any]] = []
    searched = found = 0
    with tempfile.TemporaryDirectory(prefix="clawloop-gold-") as tmp:
        settings = load_settings({"data_dir": tmp})
        for run in run_gold(made, settings):
            searched += run.searched
            found += run.searched and run.result.passed
            if not run.result.passed and not run.searched:
                raise RuntimeError(f"gold run of {run.result.task} failed: {run.result.failures}")
            examples += run.examples
    write_jsonl(out / "curriculum.jsonl", examples)
    count = len(made.items)
    console.print(f"curriculum: {count} tasks, {len(examples)} examples")
    summary: dict[str, Any] = {"tasks": count, "examples": len(examples)}
    if searched:
        # run_command families, with recipes offered in its place: solved by search
        console.print(f"curriculum: {found} of {searched} run_command tasks solved by recipes")
        summary["searched"] = {"tasks": searched, "solved": found}
    small = settings.small
    if small.shots:
        # Each example shows the library's nearest solved tasks of other families than its own.
        summary["shots"] = {
            "per_request": small.shots,
            "library": small.shot_library or "bundled",
            "left_out": small.shot_leave_out,
            "own_family": False,
        }
        console.print(
            f"curriculum: each request shows {small.shots} worked examples of other families"
        )
    return examples, summary


@dataclass(slots=True)
class Sampling:
    """How a backend attempts tasks for rejection sampling, and where the round is written."""

    name: str  # "self-play" or "teacher": the JSONL file, the data folder and the log's label
    backend: Any
    settings: Any
    tries: int = 1
    jobs: int = 1


def sampled_examples(
    console: Console, plan: Sampling, tasks: Curriculum | Suite, out: Path
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The passing runs of ``plan.backend``'s attempts at ``tasks``, as chat examples (written
    to OUT/NAME.jsonl), and a summary with the pass count per family."""
    from cli.evals.generators.selfplay import SampledTask, sample

    passed: dict[str, list[int]] = {}

    def progress(outcome: SampledTask) -> None:
        tally = passed.setdefault(outcome.family, [0, 0])
        tally[0] += outcome.passed
        tally[1] += 1
        mark = "[green]pass[/green]" if outcome.passed else "[red]fail[/red]"
        console.print(f"  {mark} {outcome.task} ({len(outcome.tries)} tries)")

    outcomes = sample(tasks, plan.settings, plan.backend, plan.tries, plan.jobs, progress)
    examples = [e for o in outcomes for e in o.examples]
    write_jsonl(out / f"{plan.name}.jsonl", examples)
    kept = sum(o.passed for o in outcomes)
    console.print(
        f"{plan.name}: {kept}/{len(outcomes)} tasks passed, {len(examples)} examples kept"
    )
    summary = {
        "tasks": len(outcomes),
        "tries": plan.tries,
        "backend": plan.settings.backend,
        "passed": kept,
        "examples": len(examples),
        "per_family": {f: {"passed": p, "tasks": n} for f, (p, n) in sorted(passed.items())},
    }
    return examples, summary


def teacher_suite(path: Path, families: list[str] | None, held_out: list[Path] | None) -> Suite:
    """A suite for the teacher to solve: refused if it is held out or shares held-out tasks."""
    from cli.evals.suite import load_suite

    for suite_path in held_out_suites(held_out):
        if suite_path.resolve() == path.resolve():
            raise UserError(
                f"--teacher-suite {path} is held out (it measures the model): "
                "give another suite, or --teacher-tasks N for generated ones"
            )
    suite = load_suite(path)
    held = {t.prompt.strip().lower() for t in held_out_tasks(held_out)}
    shared = [t.id for t in suite.tasks if t.prompt.strip().lower() in held]
    if shared:
        raise UserError(
            f"--teacher-suite {path}: {len(shared)} tasks ({', '.join(shared[:3])}) have a "
            "held-out suite's prompt: remove them, or training would see what is measured"
        )
    if families:
        suite.tasks = [t for t in suite.tasks if t.family in families]
        if not suite.tasks:
            raise UserError(
                f"--teacher-suite {path} has no task of family {', '.join(families)}: "
                "label tasks with `family:` or drop --family"
            )
    return suite


def trace_examples(
    console: Console,
    folder: Path,
    families: list[str] | None,
    since: str | None,
    out: Path,
) -> tuple[Path, dict[str, Any]]:
    """The graded-good traces in ``folder`` (what `agent traces export --grade good` gives),
    filtered by family and start time, written to OUT/traces.jsonl; that file and a summary."""
    from agent.trace import read_traces
    from cli.trace_export import export, select, since_time

    after = since_time(since) if since is not None else None
    chosen = select(read_traces(folder), families, after)
    lines, summary = export(chosen, "good")
    if not lines:
        which = f" of family {', '.join(families)}" if families else ""
        when = f" since {since}" if since else ""
        raise UserError(
            f"no graded-good traces{which}{when} in {folder}: grade runs with "
            "`agent traces grade ID good` or correct them with `agent traces fix ID`"
        )
    path = out / "traces.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    console.print(f"traces: {summary.describe()}")
    return path, {
        "folder": str(folder),
        "families": families,
        "since": after,
        "conversations": summary.written,
    }
