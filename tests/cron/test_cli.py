"""`agent cron` end to end: real processes, the real SQLite store, the real loop (scripted)."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path

from helpers import added_id, agent, configure, store

from connectors.cron.store import process_owner

UTC = dt.UTC
# 2024-06-03 is a Monday; Paris is UTC+2 then.
MORNING = dt.datetime(2024, 6, 3, 5, 59, tzinfo=UTC)  # 07:59 in Paris


def test_add_list_pause_resume_and_remove(isolated_home: Path, ws: Path) -> None:
    configure(isolated_home, ws, ["ok"])
    job = added_id(
        agent(
            isolated_home,
            "cron",
            "add",
            "0 8 * * *",
            "summarise my mail",
            "--name",
            "mail",
            at=MORNING,
        )
    )
    other = added_id(
        agent(
            isolated_home, "cron", "add", "every 2h", "water the plants", "--deliver", "telegram:42"
        )
    )
    listed = agent(isolated_home, "cron", "list").stdout
    assert f"{job}  mail  [0 8 * * *]  next 2024-06-03 08:00 CEST  → terminal" in listed
    assert f"{other}  {other}  [every 2h]" in listed and "→ telegram:42" in listed
    assert agent(isolated_home, "cron", "pause", "mail").returncode == 0
    assert f"{job}  mail  [0 8 * * *]  paused" in agent(isolated_home, "cron", "list").stdout
    # Resumed later: the slots while paused are not made up, the next one is.
    later = MORNING + dt.timedelta(days=2)
    resumed = agent(isolated_home, "cron", "resume", job, at=later)
    assert "next run 2024-06-05 08:00 CEST" in resumed.stdout, resumed.stdout
    assert agent(isolated_home, "cron", "rm", job).returncode == 0
    assert "mail" not in agent(isolated_home, "cron", "list").stdout
    gone = agent(isolated_home, "cron", "rm", job)
    assert gone.returncode == 2 and f"no job {job!r}" in gone.stderr
    bad = agent(isolated_home, "cron", "add", "every day at 8", "x")
    assert bad.returncode == 2 and "cannot read the schedule" in bad.stderr
    bad = agent(isolated_home, "cron", "add", "0 8 * * *", "x", "--deliver", "slack:1")
    assert bad.returncode == 2 and "--deliver 'slack:1'" in bad.stderr
    dup = agent(isolated_home, "cron", "add", "0 8 * * *", "x", "--name", other)
    assert dup.returncode == 2 and "exists already" in dup.stderr


def test_run_now_goes_through_the_loop_and_leaves_a_trace(isolated_home: Path, ws: Path) -> None:
    configure(isolated_home, ws, ["You have 3 new mails."])
    job = added_id(agent(isolated_home, "cron", "add", "0 8 * * *", "summarise", "--name", "mail"))
    out = agent(isolated_home, "cron", "run", "mail")
    assert out.returncode == 0, out.stderr
    assert "[mail] You have 3 new mails." in out.stdout
    [record] = store(isolated_home).runs(job)
    assert record.trigger == "manual" and record.state == "done" and record.finished_at
    trace = isolated_home / "data" / "traces" / f"{record.run_id}.jsonl"
    assert trace.exists() and '"front_end": "cron"' in trace.read_text()


def test_tick_runs_a_due_job_once_and_a_second_tick_runs_nothing(
    isolated_home: Path, ws: Path
) -> None:
    configure(isolated_home, ws, ["Nothing urgent today."])
    job = added_id(agent(isolated_home, "cron", "add", "0 8 * * *", "summarise", at=MORNING))
    early = agent(isolated_home, "cron", "tick", at=MORNING + dt.timedelta(seconds=30))
    assert early.returncode == 0 and early.stdout == "", early.stdout
    first = agent(isolated_home, "cron", "tick", at=MORNING + dt.timedelta(seconds=90))
    assert first.returncode == 0, first.stderr
    assert f"[{job}] Nothing urgent today." in first.stdout
    assert "2024-06-03 08:00 CEST  done" in first.stdout
    second = agent(isolated_home, "cron", "tick", at=MORNING + dt.timedelta(seconds=150))
    assert second.returncode == 0 and second.stdout == ""
    [record] = store(isolated_home).runs(job)
    assert record.state == "done" and record.why == ""
    assert record.scheduled_for == dt.datetime(2024, 6, 3, 6, tzinfo=UTC)
    assert store(isolated_home).find(job).next_due == dt.datetime(2024, 6, 4, 6, tzinfo=UTC)


def test_missed_slots_run_once_or_are_skipped_once(isolated_home: Path, ws: Path) -> None:
    configure(isolated_home, ws, ["Report."])
    once = added_id(
        agent(isolated_home, "cron", "add", "every 15m", "a", "--name", "once", at=MORNING)
    )
    skip = added_id(
        agent(
            isolated_home,
            "cron",
            "add",
            "every 15m",
            "b",
            "--name",
            "skip",
            "--missed",
            "skip",
            at=MORNING,
        )
    )
    # Nothing ran for three hours: twelve slots each, all past the grace time: one record each.
    later = MORNING + dt.timedelta(hours=3, minutes=12)
    out = agent(isolated_home, "cron", "tick", at=later)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("[once] Report.") == 1 and "[skip]" not in out.stdout
    [ran] = store(isolated_home).runs(once)
    [skipped] = store(isolated_home).runs(skip)
    assert ran.state == "done" and "missed at 2024-06-03 10:59 CEST" in ran.why
    assert "run once now" in ran.why
    assert skipped.state == "skipped" and "nothing was running" in skipped.why
    for record in (ran, skipped):
        assert record.first_slot == MORNING + dt.timedelta(minutes=15)
        assert record.scheduled_for == MORNING + dt.timedelta(hours=3)
    assert skipped.run_id == ""  # never run: no trace
    # The next slot is on time again: both run.
    on_time = MORNING + dt.timedelta(hours=3, minutes=15, seconds=20)
    again = agent(isolated_home, "cron", "tick", at=on_time)
    assert again.stdout.count("[once] Report.") == 1 and again.stdout.count("[skip]") == 1
    assert [r.state for r in store(isolated_home).runs(skip)] == ["skipped", "done"]
    # Down for an hour, back just in time for a slot: the skip job skips the missed three
    # and runs the current one; the run-once job runs once for all four.
    back = on_time + dt.timedelta(hours=1)
    assert agent(isolated_home, "cron", "tick", at=back).stdout.count("Report.") == 1
    last = store(isolated_home).runs(skip)[-2:]
    assert [r.state for r in last] == ["skipped", "done"]
    hour = MORNING + dt.timedelta(hours=4, minutes=15)
    assert last[0].first_slot == MORNING + dt.timedelta(hours=3, minutes=30)
    assert last[0].scheduled_for == hour - dt.timedelta(minutes=15)
    assert last[1].first_slot == last[1].scheduled_for == hour
    [*_, whole] = store(isolated_home).runs(once)
    assert whole.state == "done" and whole.scheduled_for == hour
    assert whole.first_slot == MORNING + dt.timedelta(hours=3, minutes=30)


def test_a_run_cut_short_is_interrupted_or_run_once_more(isolated_home: Path, ws: Path) -> None:
    configure(isolated_home, ws, ["Again."])
    once = added_id(
        agent(isolated_home, "cron", "add", "0 8 * * *", "a", "--name", "once", at=MORNING)
    )
    skip = added_id(
        agent(
            isolated_home,
            "cron",
            "add",
            "0 8 * * *",
            "b",
            "--name",
            "skip",
            "--missed",
            "skip",
            at=MORNING,
        )
    )
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    db = store(isolated_home)
    slot = dt.datetime(2024, 6, 3, 6, tzinfo=UTC)
    with db.transaction():
        for job in (once, skip):
            db.claim(job, "schedule", slot, slot, "running", "", "deadbeef0001", slot)
            db.db.execute("UPDATE runs SET owner = ?", (f"{dead.stdout.strip()}:1",))
            db.set_next_due(job, slot + dt.timedelta(days=1))
    live = store(isolated_home)
    with live.transaction():  # a run still going in a live process is left alone
        live.claim(once, "manual", slot, slot, "running", "", "alive0000001", slot)
        live.db.execute(
            "UPDATE runs SET owner = ? WHERE run_id = 'alive0000001'", (process_owner(),)
        )
    out = agent(isolated_home, "cron", "tick", at=slot + dt.timedelta(minutes=5))
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("[once] Again.") == 1 and "[skip]" not in out.stdout
    [retried, alive] = db.runs(once)
    [interrupted] = db.runs(skip)
    assert retried.state == "done" and retried.attempts == 2 and "interruption" in retried.why
    assert retried.run_id != "deadbeef0001"
    assert interrupted.state == "interrupted" and interrupted.attempts == 1
    assert alive.state == "running"
    # A second start finds nothing more to do.
    assert agent(isolated_home, "cron", "tick", at=slot + dt.timedelta(minutes=6)).stdout == ""


def test_a_heartbeat_stays_quiet_and_a_chat_job_without_gateway_is_printed(
    isolated_home: Path, ws: Path
) -> None:
    configure(isolated_home, ws, ["NOTHING"])
    quiet = added_id(agent(isolated_home, "cron", "add", "every 30m", "anything new?", "--quiet"))
    out = agent(isolated_home, "cron", "run", quiet)
    assert out.returncode == 0 and "NOTHING" not in out.stdout.split("\n")[0]
    [record] = store(isolated_home).runs(quiet)
    assert record.state == "skipped" and record.why == "quiet: nothing to report"
    configure(isolated_home, ws, ["Two new mails."])
    chat = added_id(
        agent(isolated_home, "cron", "add", "every 30m", "x", "--deliver", "telegram:42")
    )
    out = agent(isolated_home, "cron", "run", chat)
    assert f"[{chat}] Two new mails." in out.stdout
    [record] = store(isolated_home).runs(chat)
    assert record.state == "done"
    assert record.why == "not delivered to telegram:42: no gateway running (printed instead)"
