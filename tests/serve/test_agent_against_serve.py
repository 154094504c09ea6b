"""``agent run --backend openai --base-url URL`` completes a task against ``agent serve``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from serve_support import Served


def test_agent_run_through_the_openai_backend(server: Served, tmp_path: Path) -> None:
    workspace = tmp_path / "project"  # not the folder holding the config: that is refused
    workspace.mkdir()
    env = {
        **os.environ,
        "CLAWLOOP_MAX_TOKENS": "24",
        "CLAWLOOP_CONFIG": str(tmp_path / "config.toml"),
        "CLAWLOOP_DATA_DIR": str(tmp_path / "data"),
    }
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.main",
            "run",
            "Say hello.",
            "--backend",
            "openai",
            "--base-url",
            server.base_url,
            "--json",
            "--max-steps",
            "2",
            "--mode",
            "read-only",
            "--workspace",
            str(workspace),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert events, result.stderr
    # Greedy decoding (the default) makes the answer repeatable: a final reply within 2 steps.
    assert result.returncode == 0, result.stderr
    assert events[-1]["type"] == "final" and events[-1]["content"]
