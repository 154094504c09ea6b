"""Running `agent cron` as its users do: a real process, its config file, a fast clock."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from connectors.cron.clock import CLOCK_VAR
from connectors.cron.store import JobStore

ROOT = Path(__file__).resolve().parents[2]


def configure(home: Path, ws: Path, turns: list[object], extra: str = "") -> None:
    """A config file: the scripted fake model, the workspace, schedules read in Paris time."""
    script = home / "script.json"
    script.write_text(json.dumps(turns), encoding="utf-8")
    (home / "config.toml").write_text(
        f'backend = "fake"\nworkspace = "{ws}"\n\n[backends.fake]\nscript = "{script}"\n\n'
        f'[cron]\ntimezone = "Europe/Paris"\n{extra}',
        encoding="utf-8",
    )


def clock_at(when: dt.datetime, speed: float = 1.0) -> str:
    """A clock that reads ``when`` now and runs ``speed`` times faster than real time."""
    return f"{when.isoformat()}@{time.time()!r}x{speed!r}"


def env_for(home: Path, clock: str | None = None) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "CLAWLOOP_CONFIG": str(home / "config.toml"),
        "CLAWLOOP_DATA_DIR": str(home / "data"),
        "COLUMNS": "200",
    }
    if clock:
        env[CLOCK_VAR] = clock
    return env


def agent(
    home: Path, *args: str, at: dt.datetime | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        env=env_for(home, clock_at(at) if at else None),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def store(home: Path) -> JobStore:
    return JobStore(home / "data" / "cron" / "jobs.sqlite")


def added_id(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("added "), out.stdout
    return out.stdout.split()[1]
