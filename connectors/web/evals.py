"""Eval runs for the page: the reports `agent eval` keeps, as runs, per-suite series, and the
tasks whose outcome flipped between two runs.

A report is the JSON object `agent eval --json` prints, plus when it ran; each is validated
here at the edge, and a file that does not parse is listed as unreadable rather than failing
the page. The rates and their 95% intervals are the report's own, computed when it ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from agent.errors import UserError
from connectors.web.plot import Point


class TaskRecord(BaseModel):
    """One attempt at one task, as the report lists it."""

    model_config = ConfigDict(extra="ignore")

    task: str
    passed: bool
    failures: list[str] = []
    steps: int = 0
    seconds: float = 0.0


class VariantRecord(BaseModel):
    """One variant's totals and tasks."""

    model_config = ConfigDict(extra="ignore")

    variant: str
    passed: int
    total: int
    low: float
    high: float
    rate: float
    mean_steps: float = 0.0
    mean_seconds: float = 0.0
    backend: str | None = None
    model: str | None = None
    adapter: str | None = None
    tasks: list[TaskRecord] = []


class Report(BaseModel):
    """One `agent eval` run."""

    model_config = ConfigDict(extra="ignore")

    time: str = ""
    suite: str
    variants: list[VariantRecord]


@dataclass(slots=True)
class EvalRun:
    """A stored report and its name (the file's stem), the page's id for it."""

    id: str
    report: Report

    @property
    def when(self) -> str:
        return self.report.time[:19].replace("T", " ")


@dataclass(slots=True)
class Flip:
    """A task whose outcome differs between two runs: attempts passed out of attempts, each."""

    task: str
    a: tuple[int, int]
    b: tuple[int, int]


@dataclass(slots=True)
class EvalRuns:
    """Every readable report, oldest first, and the files that could not be read."""

    runs: list[EvalRun] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    def suites(self) -> dict[str, list[EvalRun]]:
        """The runs of each suite, oldest first."""
        out: dict[str, list[EvalRun]] = {}
        for run in self.runs:
            out.setdefault(run.report.suite, []).append(run)
        return out

    def get(self, run_id: str) -> EvalRun:
        for run in self.runs:
            if run.id == run_id:
                return run
        raise UserError(f"there is no eval run {run_id!r}; /evals lists them")


def read_runs(folder: Path, limit: int = 500) -> EvalRuns:
    """The reports in ``folder`` (the newest ``limit``), oldest first."""
    found = EvalRuns()
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.json"))[-limit:]:  # names start with the time
        try:
            report = Report.model_validate_json(path.read_bytes())
        except (OSError, ValidationError):
            found.unreadable.append(path.name)
            continue
        found.runs.append(EvalRun(path.stem, report))
    return found


def task_outcomes(run: EvalRun) -> dict[str, tuple[int, int]]:
    """Each task's attempts passed and attempts made, over every variant of the run."""
    out: dict[str, tuple[int, int]] = {}
    for variant in run.report.variants:
        for t in variant.tasks:
            passed, total = out.get(t.task, (0, 0))
            out[t.task] = (passed + t.passed, total + 1)
    return out


def flips(a: EvalRun, b: EvalRun) -> list[Flip]:
    """The tasks of both runs that passed every attempt in one and failed every one in the other."""
    left, right = task_outcomes(a), task_outcomes(b)
    out = []
    for task in sorted(left.keys() & right.keys()):
        (pa, na), (pb, nb) = left[task], right[task]
        if (pa == na and pb == 0) or (pa == 0 and pb == nb):
            out.append(Flip(task, left[task], right[task]))
    return out


def suite_points(runs: list[EvalRun]) -> list[Point]:
    """One point per variant of each run, oldest first: the suite's rate across runs."""
    points = []
    for run in runs:
        for v in run.report.variants:
            arm = " ".join(x for x in (v.variant, v.adapter and f"+{Path(v.adapter).name}") if x)
            points.append(
                Point(
                    label=run.when[5:16],
                    sublabel=arm,
                    rate=v.rate,
                    low=v.low,
                    high=v.high,
                    title=(
                        f"{run.id} {arm}: {v.passed}/{v.total} passed, {v.rate:.0%} "
                        f"(95% interval {v.low:.0%}-{v.high:.0%})"
                    ),
                )
            )
    return points
