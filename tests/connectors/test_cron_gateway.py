"""Scheduled jobs in `agent gateway`: the job's ask goes to the owner's chat, its answer too.

A real gateway process against the local Bot API server, its jobs on a fast clock
(``CLAWLOOP_CRON_CLOCK``: one simulated minute per real second) so that a job added for 08:00
comes due a moment after the gateway starts.
"""

from __future__ import annotations

import datetime as dt
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from fake_telegram import FakeTelegram
from loopthread import wait_for
from test_gateway_process import OWNER, configure, texts

from connectors.cron.clock import CLOCK_VAR, FastClock
from connectors.cron.store import JobStore

ROOT = Path(__file__).resolve().parents[2]


def test_a_due_job_asks_the_owner_and_delivers_its_answer_to_the_chat(
    fake: FakeTelegram, isolated_home: Path, ws: Path
) -> None:
    touch = {"tool_calls": [{"name": "shell", "arguments": {"command": "touch made-by-job"}}]}
    env = configure(isolated_home, ws, fake, [touch, "Made the file."])
    (isolated_home / "config.toml").write_text(
        (isolated_home / "config.toml").read_text() + '\n[cron]\ntimezone = "UTC"\n'
    )
    added_at = FastClock(dt.datetime(2024, 6, 3, 7, 0, tzinfo=dt.UTC), time.time(), 1.0)
    env[CLOCK_VAR] = added_at.spec()
    add = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.main",
            "cron",
            "add",
            "0 8 * * *",
            "make the file",
            "--name",
            "maker",
            "--deliver",
            f"telegram:{OWNER}",
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert add.returncode == 0, add.stderr
    clock = FastClock(dt.datetime(2024, 6, 3, 7, 59, 55, tzinfo=dt.UTC), time.time(), 60.0)
    env[CLOCK_VAR] = clock.spec()
    # 07:59:55 (UTC, the zone set here) as the gateway starts; the job is for 08:00.
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "gateway"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ask = wait_for(
            lambda: next((t for t in texts(fake) if t.startswith("🔐 Approval needed")), None),
            60,
            "the job's ask in the owner's chat",
        )
        assert not (ws / "made-by-job").exists()
        ask_id = re.search(r"/approve (\w+)", ask)
        assert ask_id is not None and "touch made-by-job" in ask
        fake.say(OWNER, OWNER, f"/approve {ask_id.group(1)}")
        wait_for(lambda: "⏰ maker\nMade the file." in texts(fake), 60, "the job's answer")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()

    assert proc.returncode == 0, err
    assert (ws / "made-by-job").exists()
    assert texts(fake).count("⏰ maker\nMade the file.") == 1
    db = JobStore(isolated_home / "data" / "cron" / "jobs.sqlite")
    [record] = db.runs()
    assert record.state == "done" and record.why.endswith(f"delivered to telegram:{OWNER}")
    assert record.scheduled_for == dt.datetime(2024, 6, 3, 8, 0, tzinfo=dt.UTC)
    trace = isolated_home / "data" / "traces" / f"{record.run_id}.jsonl"
    assert trace.exists() and '"front_end": "cron"' in trace.read_text()
