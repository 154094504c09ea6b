"""The packages stay lint clean (ruff) and type clean (mypy), as the style guide asks."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_ruff_check_and_format() -> None:
    assert shutil.which("ruff") or _run("ruff", "--version").returncode == 0
    lint = _run("ruff", "check", ".")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = _run("ruff", "format", "--check", ".")
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_mypy_on_the_packages() -> None:
    out = _run("mypy")  # the packages are listed in pyproject.toml
    assert out.returncode == 0, out.stdout + out.stderr
