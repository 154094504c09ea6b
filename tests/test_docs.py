"""docs/cli.md is generated from the CLI; this fails when a command changes and the doc does not."""

from __future__ import annotations

from pathlib import Path

from cli.docgen import render

ROOT = Path(__file__).resolve().parents[1]


def test_cli_reference_matches_the_cli() -> None:
    current = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert current == render(), "docs/cli.md is stale: regenerate it with `python -m cli.docgen`"


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    line = next(ln for ln in readme.splitlines() if "pytest" in ln and "pip install" in ln)
    test_part = line[line.index("python3 -m venv") :].strip().rstrip("`")
    assert test_part in ci
