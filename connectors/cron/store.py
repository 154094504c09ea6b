"""The job store: jobs, their next due time and their run log, in one SQLite file.

Every change is one transaction (``BEGIN IMMEDIATE``, synchronous commits), so a process killed
with SIGKILL leaves either all of a change or none of it. A scheduled run is claimed (a run
record in state ``claimed``, and the job's next due time moved past it) in one transaction
before it starts; the log's unique key (job, trigger, scheduled_for) keeps a slot from being
claimed twice, whoever asks.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import secrets
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agent.errors import UserError

Missed = Literal["run-once", "skip"]
UNFINISHED = ("claimed", "running")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    schedule TEXT NOT NULL,
    prompt TEXT NOT NULL,
    deliver TEXT NOT NULL,
    missed TEXT NOT NULL,
    quiet INTEGER NOT NULL DEFAULT 0,
    paused INTEGER NOT NULL DEFAULT 0,
    anchor TEXT NOT NULL,
    next_due TEXT,
    created TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    trigger TEXT NOT NULL,
    scheduled_for TEXT NOT NULL,
    first_slot TEXT NOT NULL,
    state TEXT NOT NULL,
    why TEXT NOT NULL DEFAULT '',
    run_id TEXT NOT NULL DEFAULT '',
    owner TEXT NOT NULL DEFAULT '',
    attempts INTEGER NOT NULL DEFAULT 1,
    claimed_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT,
    UNIQUE (job_id, trigger, scheduled_for)
);
"""


def iso(when: dt.datetime) -> str:
    """An instant as stored: UTC, ISO 8601, microseconds always written (so it sorts)."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


def parse_iso(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


@dataclass(slots=True)
class Job:
    """One scheduled job as defined by ``agent cron add``."""

    id: str
    name: str
    schedule: str
    prompt: str
    deliver: str  # "terminal", "telegram:CHAT" or "discord:CHANNEL"
    missed: Missed
    quiet: bool
    paused: bool
    anchor: dt.datetime  # intervals count from here
    next_due: dt.datetime | None
    created: dt.datetime


@dataclass(slots=True)
class RunRecord:
    """One entry of the run log: a scheduled slot (or a manual run) and what became of it.

    ``first_slot`` .. ``scheduled_for`` are the slots this record stands for: one slot, or
    several that were missed or late and are run (or skipped) once.
    """

    id: int
    job_id: str
    trigger: str  # "schedule" or "manual"
    scheduled_for: dt.datetime
    first_slot: dt.datetime
    state: str  # claimed, running, done, failed, skipped, interrupted
    why: str
    run_id: str
    owner: str
    attempts: int
    claimed_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None


class JobStore:
    """The SQLite file of jobs and runs (``cron/jobs.sqlite`` in the data folder)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(path, isolation_level=None, timeout=30)
        except (OSError, sqlite3.Error) as exc:
            raise UserError(
                f"cannot open the job store {path}: {exc} (set CLAWLOOP_DATA_DIR to a writable "
                "folder)"
            ) from None
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(_SCHEMA)

    def close(self) -> None:
        self.db.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One atomic change; other processes wait (up to 30 s) rather than interleave.

        Inside another transaction it joins that one.
        """
        if self.db.in_transaction:
            yield
            return
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # -- jobs ---------------------------------------------------------------------------------

    def add(self, job: Job) -> Job:
        """Store a new job (its id is made here); a name already taken is a UserError."""
        job.id = secrets.token_hex(3)
        job.name = job.name or job.id
        try:
            with self.transaction():
                self.db.execute(
                    "INSERT INTO jobs VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        job.id,
                        job.name,
                        job.schedule,
                        job.prompt,
                        job.deliver,
                        job.missed,
                        int(job.quiet),
                        int(job.paused),
                        iso(job.anchor),
                        iso(job.next_due) if job.next_due else None,
                        iso(job.created),
                    ),
                )
        except sqlite3.IntegrityError:
            raise UserError(
                f"a job named {job.name!r} exists already: pick another --name"
            ) from None
        return job

    def jobs(self) -> list[Job]:
        rows = self.db.execute("SELECT * FROM jobs ORDER BY created, id").fetchall()
        return [_job(row) for row in rows]

    def find(self, key: str) -> Job:
        """The job with this id or name; none is a UserError."""
        row = self.db.execute("SELECT * FROM jobs WHERE id = ? OR name = ?", (key, key)).fetchone()
        if row is None:
            raise UserError(f"no job {key!r}: `agent cron list` shows the jobs and their ids")
        return _job(row)

    def get(self, job_id: str) -> Job | None:
        row = self.db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return _job(row) if row else None

    def remove(self, job_id: str) -> None:
        with self.transaction():
            self.db.execute("DELETE FROM jobs WHERE id = ?", (job_id,))

    def set_paused(self, job_id: str, paused: bool, next_due: dt.datetime | None) -> None:
        with self.transaction():
            self.db.execute(
                "UPDATE jobs SET paused = ?, next_due = ? WHERE id = ?",
                (int(paused), iso(next_due) if next_due else None, job_id),
            )

    def set_next_due(self, job_id: str, next_due: dt.datetime | None) -> None:
        """Move a job's next due time (inside the caller's transaction)."""
        self.db.execute(
            "UPDATE jobs SET next_due = ? WHERE id = ?",
            (iso(next_due) if next_due else None, job_id),
        )

    def due(self, now: dt.datetime) -> list[Job]:
        rows = self.db.execute(
            "SELECT * FROM jobs WHERE paused = 0 AND next_due IS NOT NULL AND next_due <= ? "
            "ORDER BY next_due",
            (iso(now),),
        ).fetchall()
        return [_job(row) for row in rows]

    def next_wake(self) -> dt.datetime | None:
        row = self.db.execute(
            "SELECT MIN(next_due) FROM jobs WHERE paused = 0 AND next_due IS NOT NULL"
        ).fetchone()
        return parse_iso(row[0]) if row and row[0] else None

    # -- the run log --------------------------------------------------------------------------

    def claim(
        self,
        job_id: str,
        trigger: str,
        scheduled_for: dt.datetime,
        first_slot: dt.datetime,
        state: str,
        why: str,
        run_id: str,
        now: dt.datetime,
    ) -> RunRecord | None:
        """Insert a run record (inside the caller's transaction); None if the slot is taken."""
        finished = iso(now) if state not in UNFINISHED else None
        cursor = self.db.execute(
            "INSERT OR IGNORE INTO runs (job_id, trigger, scheduled_for, first_slot, state, why, "
            "run_id, owner, claimed_at, finished_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                job_id,
                trigger,
                iso(scheduled_for),
                iso(first_slot),
                state,
                why,
                run_id,
                process_owner(),
                iso(now),
                finished,
            ),
        )
        if cursor.rowcount == 0:
            return None
        return self.run(cursor.lastrowid or 0)

    def run(self, record_id: int) -> RunRecord:
        row = self.db.execute("SELECT * FROM runs WHERE id = ?", (record_id,)).fetchone()
        return _record(row)

    def started(self, record_id: int, now: dt.datetime) -> None:
        with self.transaction():
            self.db.execute(
                "UPDATE runs SET state = 'running', started_at = ? WHERE id = ?",
                (iso(now), record_id),
            )

    def finish(self, record_id: int, state: str, why: str, now: dt.datetime) -> None:
        """Record a run's outcome; one that already has one keeps it."""
        with self.transaction():
            self.db.execute(
                "UPDATE runs SET state = ?, why = ?, finished_at = ? "
                "WHERE id = ? AND state IN ('claimed', 'running')",
                (state, why, iso(now), record_id),
            )

    def retry(self, record_id: int, run_id: str, why: str) -> None:
        """Take over an interrupted run to run it once more (inside the caller's transaction)."""
        self.db.execute(
            "UPDATE runs SET state = 'claimed', run_id = ?, owner = ?, attempts = attempts + 1, "
            "why = ?, started_at = NULL WHERE id = ?",
            (run_id, process_owner(), why, record_id),
        )

    def unfinished(self) -> list[RunRecord]:
        rows = self.db.execute(
            "SELECT * FROM runs WHERE state IN ('claimed', 'running') ORDER BY id"
        ).fetchall()
        return [_record(row) for row in rows]

    def runs(self, job_id: str | None = None, limit: int | None = None) -> list[RunRecord]:
        """The run log, oldest first (the last ``limit`` records)."""
        where = "WHERE job_id = ?" if job_id else ""
        args: tuple[object, ...] = (job_id,) if job_id else ()
        rows = self.db.execute(f"SELECT * FROM runs {where} ORDER BY id", args).fetchall()
        records = [_record(row) for row in rows]
        return records[-limit:] if limit else records


def _job(row: sqlite3.Row) -> Job:
    return Job(
        id=row["id"],
        name=row["name"],
        schedule=row["schedule"],
        prompt=row["prompt"],
        deliver=row["deliver"],
        missed=row["missed"],
        quiet=bool(row["quiet"]),
        paused=bool(row["paused"]),
        anchor=parse_iso(row["anchor"]),
        next_due=parse_iso(row["next_due"]) if row["next_due"] else None,
        created=parse_iso(row["created"]),
    )


def _record(row: sqlite3.Row) -> RunRecord:
    return RunRecord(
        id=row["id"],
        job_id=row["job_id"],
        trigger=row["trigger"],
        scheduled_for=parse_iso(row["scheduled_for"]),
        first_slot=parse_iso(row["first_slot"]),
        state=row["state"],
        why=row["why"],
        run_id=row["run_id"],
        owner=row["owner"],
        attempts=row["attempts"],
        claimed_at=parse_iso(row["claimed_at"]),
        started_at=parse_iso(row["started_at"]) if row["started_at"] else None,
        finished_at=parse_iso(row["finished_at"]) if row["finished_at"] else None,
    )


def process_owner(pid: int | None = None) -> str:
    """``pid:start-time``: names a process so that a reused pid is not taken for it."""
    pid = pid or os.getpid()
    return f"{pid}:{_start_time(pid)}"


def owner_alive(owner: str) -> bool:
    """Whether the process that wrote ``owner`` still runs."""
    pid_text, _, start = owner.partition(":")
    if not pid_text.isdigit():
        return False
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process with this pid: compare start times
    return _start_time(pid) == start


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot ("" if unknown or a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat.rsplit(")", 1)[-1].split()
    if len(fields) <= 19 or fields[0] in ("Z", "X"):
        return ""  # a killed process not yet reaped is not running anything
    return fields[19]
