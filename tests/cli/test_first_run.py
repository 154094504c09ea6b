"""The README's own example on the embedded default model, as a newcomer runs it.

The real bundled SmolLM2-135M through llama.cpp, greedy and on one thread so the run is
reproducible, in a workspace holding this repository's README.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("llama_cpp")


@pytest.mark.slow
def test_how_many_lines_are_in_readme_gets_the_right_number(tmp_path: Path) -> None:
    from agent.errors import UserError
    from backends.gguf.default_model import default_model_path

    try:
        default_model_path()
    except UserError as exc:
        pytest.skip(exc.message)
    workspace = tmp_path / "project"
    workspace.mkdir()
    shutil.copy(ROOT / "README.md", workspace / "README.md")
    shutil.copy(ROOT / "pyproject.toml", workspace / "pyproject.toml")
    lines = len((workspace / "README.md").read_text(encoding="utf-8").splitlines())
    config = tmp_path / "config.toml"
    config.write_text("[backends.llamacpp]\nthreads = 1\n", encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "CLAWLOOP_CONFIG": str(config),
        "CLAWLOOP_DATA_DIR": str(tmp_path / "data"),
    }
    out = subprocess.run(
        [sys.executable, "-m", "cli.main", "run", "how many lines are in README.md?", "--json"],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    final = events[-1]
    assert final["type"] == "final" and str(lines) in final["content"], final
    calls = [e["call"]["function"]["name"] for e in events if e["type"] == "tool_call"]
    assert calls == ["count_lines"]
