"""Merge the steps of ``bench/gpu_check.sh`` into one JSON file (standard library only).

The script leaves, in one folder: ``steps.tsv`` (a line per step: name, exit status, seconds),
``<step>.json`` for each step that writes figures, ``pytest-gpu.xml`` (pytest's JUnit report)
and ``gpu.txt`` (``nvidia-smi -L``). The merged file has the GPU, every step with its exit
status, seconds and figures (the pytest step's as counts), and whether all steps passed.

    python bench/gpu_check_json.py RESULTS_DIR OUT.json
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any


def junit_counts(path: Path) -> dict[str, int]:
    """Tests, failures, errors and skips of a pytest ``--junitxml`` report."""
    root = ElementTree.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in suites:
        for key in counts:
            counts[key] += int(suite.get(key, "0"))
    counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return counts


def step_figures(folder: Path, name: str) -> Any:
    """The step's figures: its JSON file, its JUnit counts, or None."""
    figures = folder / f"{name}.json"
    if figures.is_file():
        try:
            return json.loads(figures.read_text())
        except json.JSONDecodeError as exc:
            return {"unreadable": str(exc)}
    junit = folder / f"{name}.xml"
    if junit.is_file():
        try:
            return junit_counts(junit)
        except ElementTree.ParseError as exc:
            return {"unreadable": str(exc)}
    return None


def merge(folder: Path) -> dict[str, Any]:
    """Everything the run left in ``folder``, as one dictionary."""
    gpu = folder / "gpu.txt"
    report: dict[str, Any] = {
        "gpu": gpu.read_text().strip() if gpu.is_file() else None,
        "steps": {},
    }
    steps = folder / "steps.tsv"
    lines = steps.read_text().splitlines() if steps.is_file() else []
    for line in lines:
        name, status, seconds, *note = line.split("\t")
        report["steps"][name] = {
            "exit": int(status),
            "seconds": int(seconds),
            "note": note[0] if note else "",
            "figures": step_figures(folder, name),
        }
    failed = [name for name, step in report["steps"].items() if step["exit"] not in (0, -1)]
    report["failed_steps"] = failed
    report["passed"] = report["gpu"] is not None and not failed
    return report


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit("usage: python bench/gpu_check_json.py RESULTS_DIR OUT.json")
    folder, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.write_text(json.dumps(merge(folder), indent=2))


if __name__ == "__main__":
    main()
