"""What `agent eval` prints: a table per variant, a per-task JSON list, and a plot."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agent.errors import UserError
from cli.evals.runner import Variant
from cli.evals.stats import wilson


@dataclass(slots=True)
class Summary:
    """One variant's totals."""

    variant: str
    passed: int
    total: int
    low: float
    high: float
    mean_steps: float
    mean_tokens: float
    mean_seconds: float

    @property
    def rate(self) -> float:
        return self.passed / self.total if self.total else 0.0


def summarize(variant: Variant) -> Summary:
    """Success rate with its 95% interval, and the means, for one variant."""
    results = variant.results
    n = len(results)
    passed = sum(r.passed for r in results)
    low, high = wilson(passed, n)

    def mean(values: list[float]) -> float:
        return sum(values) / n if n else 0.0

    return Summary(
        variant=variant.name,
        passed=passed,
        total=n,
        low=low,
        high=high,
        mean_steps=mean([r.steps for r in results]),
        mean_tokens=mean([r.prompt_tokens + r.completion_tokens for r in results]),
        mean_seconds=mean([r.seconds for r in results]),
    )


def print_table(console: Console, suite: str, variants: list[Variant]) -> None:
    """The rich table: one row per variant."""
    table = Table(title=f"suite {suite}")
    for column in ("variant", "passed", "success", "95% interval", "steps", "tokens", "s/task"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    for variant in variants:
        s = summarize(variant)
        table.add_row(
            s.variant,
            f"{s.passed}/{s.total}",
            f"{s.rate:.1%}",
            f"{s.low:.1%}–{s.high:.1%}",
            f"{s.mean_steps:.1f}",
            f"{s.mean_tokens:.0f}",
            f"{s.mean_seconds:.1f}",
        )
    console.print(table)


def to_json(suite: str, variants: list[Variant]) -> dict[str, Any]:
    """Every variant's summary and per-task pass/fail list."""
    return {
        "suite": suite,
        "variants": [
            {
                **asdict(summarize(v)),
                "rate": summarize(v).rate,
                "backend": v.settings.backend,
                "model": v.settings.model,
                "adapter": v.settings.adapter,
                "tasks": [asdict(r) for r in sorted(v.results, key=lambda r: r.task)],
            }
            for v in variants
        ],
    }


def write_plot(path: Path, suite: str, variants: list[Variant]) -> None:
    """A bar chart of success per variant with its 95% interval."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("--plot needs matplotlib: pip install 'clawloop[eval]'") from None
    summaries = [summarize(v) for v in variants]
    fig, ax = plt.subplots(figsize=(max(4, 1.4 * len(summaries) + 2), 3.5))
    rates = [s.rate * 100 for s in summaries]
    errors = [
        [r - s.low * 100 for r, s in zip(rates, summaries, strict=True)],
        [s.high * 100 - r for r, s in zip(rates, summaries, strict=True)],
    ]
    ax.bar([s.variant for s in summaries], rates, yerr=errors, capsize=6, color="#4a7ab7")
    ax.set_ylim(0, 100)
    ax.set_ylabel("tasks passed (%)")
    ax.set_title(f"{suite}: success with 95% interval")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def dump_json(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2)
