"""The scheduler: claims what is due in the job store, runs it, records the outcome.

A scheduled run goes claimed → running → done / failed / skipped, each step committed before the
next begins, so a process killed at any moment leaves the log telling what happened:

- a run claimed or running whose process is gone is recorded ``interrupted`` when the next
  scheduler starts, and not run again, unless its job says ``run-once`` for missed runs: then it
  runs once more (once: interrupted again, it stays interrupted);
- slots that passed while no scheduler was running are one record, run once or recorded
  ``skipped`` per the job's ``missed`` setting, never one run per missed slot;
- slots that came due while this scheduler was busy with another job are run once, late.

Only one scheduler runs per data folder (the gateway, ``agent cron serve`` or ``agent cron
tick``), held by a lock file; jobs run one at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import fcntl
import logging
import os
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

from agent.errors import UserError
from agent.run_context import new_run_id
from connectors.cron.clock import Clock
from connectors.cron.schedule import Schedule, parse_schedule
from connectors.cron.store import UNFINISHED, Job, JobStore, RunRecord, owner_alive
from connectors.logs import LOGGER, log

RECHECK_S = 5.0  # real seconds between looks at the store, for jobs added by another process
_TICK = dt.timedelta(microseconds=1)
_BACK = (dt.timedelta(hours=1), dt.timedelta(days=1), dt.timedelta(days=8), dt.timedelta(days=400))


@dataclass(slots=True)
class Outcome:
    """How a run ended: ``done``, ``failed`` or ``skipped``, and why (delivery notes too)."""

    state: str
    why: str = ""


Execute = Callable[[Job, RunRecord], Awaitable[Outcome]]


class SchedulerBusy(UserError):
    """Another process holds the scheduler lock for this data folder."""


class Scheduler:
    """Runs the store's due jobs through ``execute``, on ``clock``."""

    def __init__(
        self,
        store: JobStore,
        clock: Clock,
        execute: Execute,
        tz: ZoneInfo,
        grace: dt.timedelta = dt.timedelta(minutes=10),
        lock_path: Path | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.execute = execute
        self.tz = tz
        self.grace = grace
        self.lock_path = lock_path or store.path.with_name("scheduler.lock")
        self.started = clock.now()

    def schedule(self, job: Job) -> Schedule:
        return parse_schedule(job.schedule, self.tz)

    # -- the two ways to run: once, or until stopped -------------------------------------------

    async def tick(self) -> list[RunRecord]:
        """Run what is due now (interrupted runs first), then return the records it wrote."""
        with self.lock():
            ids = [await self._run(job, record) for job, record in self.recover()]
            while (claimed := self.claim_next()) is not None:
                job, record = claimed
                runs = record.state in UNFINISHED
                ids.append(await self._run(job, record) if runs else record.id)
            return [self.store.run(i) for i in ids]

    async def serve(self, stop: asyncio.Event) -> None:
        """Run jobs as they come due until ``stop`` is set."""
        with self.lock():
            for job, record in self.recover():
                await self._run(job, record)
            while not stop.is_set():
                while not stop.is_set() and (claimed := self.claim_next()) is not None:
                    job, record = claimed
                    if record.state in UNFINISHED:
                        await self._run(job, record)
                await self._wait(stop)

    async def run_now(self, job: Job) -> RunRecord:
        """Run ``job`` once now, outside its schedule (``agent cron run``)."""
        now = self.clock.now()
        with self.store.transaction():
            record = self.store.claim(job.id, "manual", now, now, "claimed", "", new_run_id(), now)
        if record is None:  # the same microsecond twice: a bug
            raise RuntimeError("a manual run's slot was taken")
        return self.store.run(await self._run(job, record))

    async def _wait(self, stop: asyncio.Event) -> None:
        wake = self.store.next_wake()
        sleeps: list[asyncio.Future[object]] = [asyncio.ensure_future(stop.wait())]
        if wake is not None:
            sleeps.append(asyncio.ensure_future(self.clock.sleep_until(wake)))
        try:
            await asyncio.wait(sleeps, timeout=RECHECK_S, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in sleeps:
                task.cancel()

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the data folder's scheduler lock; held elsewhere, :class:`SchedulerBusy`."""
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                raise SchedulerBusy(
                    f"another scheduler (pid {holder}: the gateway or `agent cron serve`) runs "
                    "this data folder's jobs; it runs due jobs itself"
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            yield
        finally:
            os.close(fd)  # releases the lock (a killed process's is released by the kernel)

    # -- claims --------------------------------------------------------------------------------

    def recover(self) -> list[tuple[Job, RunRecord]]:
        """Settle runs left unfinished by a process that is gone; returns those to run again."""
        again: list[tuple[Job, RunRecord]] = []
        now = self.clock.now()
        with self.store.transaction():
            for record in self.store.unfinished():
                if owner_alive(record.owner):
                    continue
                job = self.store.get(record.job_id)
                retry = (
                    job is not None
                    and record.trigger == "schedule"
                    and job.missed == "run-once"
                    and record.attempts < 2
                )
                if job is not None and retry:
                    why = f"run again after an interruption (run {record.run_id} was cut short)"
                    self.store.retry(record.id, new_run_id(), why)
                    again.append((job, self.store.run(record.id)))
                    log(logging.INFO, "cron_retry", job=record.job_id, record=record.id)
                else:
                    why = "interrupted: the process running it stopped before it finished"
                    self.store.finish(record.id, "interrupted", why, now)
                    log(logging.INFO, "cron_interrupted", job=record.job_id, record=record.id)
        return again

    def claim_next(self) -> tuple[Job, RunRecord] | None:
        """Claim the most overdue job's run (or record it skipped); None when nothing is due."""
        now = self.clock.now()
        with self.store.transaction():
            for job in self.store.due(now):
                schedule = self.schedule(job)
                first = job.next_due
                if first is None:  # due() returns only jobs with a next due time
                    continue
                last = self._last_slot(schedule, job, first, now)
                self.store.set_next_due(job.id, schedule.next_after(now, job.anchor))
                on_time = now - last <= self.grace or last >= self.started
                if on_time and first != last and job.missed == "skip":
                    # The slots before this one were missed: skipped, as one record.
                    before = self._last_slot(schedule, job, first, last - _TICK)
                    if before < self.started:
                        self._skip(job, first, before, now)
                        first = last
                state, why = self._decide(job, first, last, on_time)
                run_id = new_run_id() if state == "claimed" else ""  # a skipped run has no trace
                record = self.store.claim(job.id, "schedule", last, first, state, why, run_id, now)
                if record is not None:
                    return job, record
        return None

    def _skip(self, job: Job, first: dt.datetime, last: dt.datetime, now: dt.datetime) -> None:
        state, why = self._decide(job, first, last, on_time=False)
        self.store.claim(job.id, "schedule", last, first, state, why, "", now)

    def _decide(
        self, job: Job, first: dt.datetime, last: dt.datetime, on_time: bool
    ) -> tuple[str, str]:
        local = last.astimezone(self.tz).strftime("%Y-%m-%d %H:%M %Z")
        since = first.astimezone(self.tz).strftime("%Y-%m-%d %H:%M %Z")
        several = f" (slots from {since} on, taken as one)" if first != last else ""
        if on_time:
            return "claimed", (f"late{several}" if several else "")
        if job.missed == "skip":
            return "skipped", f"missed: nothing was running at {local}{several}"
        return "claimed", f"missed at {local}{several}: run once now"

    def _last_slot(
        self, schedule: Schedule, job: Job, first: dt.datetime, now: dt.datetime
    ) -> dt.datetime:
        """The latest slot at or before ``now`` (``first`` is one), found without a long walk."""
        for back in _BACK:
            start = max(first, now - back)
            found = _walk(schedule, job, start - dt.timedelta(microseconds=1), now)
            if found is not None:
                return found
        return _walk(schedule, job, first - dt.timedelta(microseconds=1), now) or first

    # -- one run -------------------------------------------------------------------------------

    async def _run(self, job: Job, record: RunRecord) -> int:
        self.store.started(record.id, self.clock.now())
        log(logging.INFO, "cron_run", job=job.id, record=record.id, run=record.run_id)
        try:
            outcome = await self.execute(job, record)
        except asyncio.CancelledError:
            raise  # left running: the next scheduler records it interrupted
        except Exception as exc:  # one failing job must not stop the others
            logging.getLogger(LOGGER).exception(
                "cron_run_failed", extra={"fields": {"job": job.id}}
            )
            outcome = Outcome("failed", f"error: {type(exc).__name__}: {exc}")
        why = "; ".join(part for part in (record.why, outcome.why) if part)
        self.store.finish(record.id, outcome.state, why, self.clock.now())
        return record.id


def _walk(schedule: Schedule, job: Job, after: dt.datetime, now: dt.datetime) -> dt.datetime | None:
    last = None
    when = schedule.next_after(after, job.anchor)
    while when is not None and when <= now:
        last = when
        when = schedule.next_after(when, job.anchor)
    return last
