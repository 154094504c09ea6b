"""A day of jobs on a fast clock, the scheduler killed with SIGKILL five times and restarted.

`agent cron serve` runs as a real process on a clock one simulated hour per real second
(``CLAWLOOP_CRON_CLOCK``). Afterwards every slot of every job is in the run log exactly once,
with an outcome: none lost (each slot inside one record's first_slot..scheduled_for), none
doubled (no two records share a slot), none left claimed or running.
"""

from __future__ import annotations

import datetime as dt
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from zoneinfo import ZoneInfo

from helpers import ROOT, added_id, agent, configure, env_for, store

from connectors.cron.clock import FastClock
from connectors.cron.schedule import parse_schedule

UTC = dt.UTC
START = dt.datetime(2024, 3, 30, 12, 0, tzinfo=UTC)  # the night of a daylight-saving change
SPEED = 3600.0  # one simulated hour per real second
HOURS = 24


def serve(home: Path, clock: FastClock) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cli.main", "cron", "serve"],
        env=env_for(home, clock.spec()),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_a_running_job(home: Path, limit_s: float = 3.0) -> None:
    db = store(home)
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and not any(r.state == "running" for r in db.unfinished()):
        time.sleep(0.002)
    db.close()


def test_a_day_of_jobs_survives_five_kills(isolated_home: Path, ws: Path) -> None:
    # Each run calls a tool for a moment, so that a kill can land inside a run.
    nap = {"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 0.1"}}]}
    configure(
        isolated_home, ws, [nap, "done."] * 5_000, '\n[sandbox]\nallow = ["shell(sleep *)"]\n'
    )
    jobs = {
        "half": ("every 30m", "run-once"),
        "hourly": ("0 * * * *", "skip"),
        "night": ("30 2 * * *", "run-once"),  # in the spring-forward gap tonight
    }
    ids = {
        name: added_id(
            agent(
                isolated_home,
                "cron",
                "add",
                when,
                name,
                "--name",
                name,
                "--missed",
                missed,
                at=START,
            )
        )
        for name, (when, missed) in jobs.items()
    }
    clock = FastClock(START, time.time(), SPEED)
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    rng.seed(seed)
    kills = sorted(rng.uniform(1.0, HOURS - 2.0) for _ in range(5))  # real seconds from start
    began = time.monotonic()
    proc = serve(isolated_home, clock)
    try:
        for i, at in enumerate(kills):
            time.sleep(max(0.0, at - (time.monotonic() - began)))
            if i % 2:  # every other kill lands while a job runs
                wait_for_a_running_job(isolated_home)
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            proc = serve(isolated_home, clock)
        time.sleep(max(0.0, HOURS + 0.5 - (time.monotonic() - began)))
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
    finally:
        proc.kill()
        proc.wait(10)

    db = store(isolated_home)
    paris = ZoneInfo("Europe/Paris")
    tally: dict[str, int] = {}
    for name, job_id in ids.items():
        job = db.find(job_id)
        # The scheduler kept going to the end of the day (on a busy machine a run takes more
        # than its simulated slot, so the last hours may still be due when the test stops it).
        assert job.next_due is not None and job.next_due > START + dt.timedelta(hours=HOURS // 2)
        schedule = parse_schedule(job.schedule, paris)
        expected = schedule.slots(
            job.anchor, job.next_due - dt.timedelta(microseconds=1), job.anchor
        )
        expected = [s for s in expected if s > job.anchor]
        records = db.runs(job_id)
        covered = []
        for r in records:
            assert r.state in ("done", "skipped", "interrupted"), (name, r.why, r)
            inside = [s for s in expected if r.first_slot <= s <= r.scheduled_for]
            assert inside and inside[-1] == r.scheduled_for, (name, r)
            covered.extend(inside)
            tally[r.state] = tally.get(r.state, 0) + 1
        assert sorted(covered) == expected, f"{name}: a slot lost or doubled (seed {seed})"
        assert len(set(covered)) == len(covered)
    night = [r for r in db.runs(ids["night"])]
    assert night and night[0].scheduled_for.astimezone(paris).strftime("%H:%M") == "03:30"
    cut = tally.get("interrupted", 0) + sum(
        r.attempts == 2 for job_id in ids.values() for r in db.runs(job_id)
    )
    assert tally.get("done", 0) > 15 and cut >= 1, tally
    took = time.monotonic() - began
    print(f"soak: seed {seed}, kills near {[round(k, 1) for k in kills]} s, {cut} runs cut short,")
    print(f"outcomes {tally}, {took:.1f} s")
