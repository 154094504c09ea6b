"""The scheduler's clock: the real one, or a fast one for tests and demos.

``CLAWLOOP_CRON_CLOCK`` (read here only) makes every process that reads it share one fast
simulated clock: ``START@EPOCHxSPEED``, e.g. ``2024-03-30T00:00:00+00:00@1700000000.0x3600``,
means "at real Unix time EPOCH the simulated time was START, and it runs SPEED times faster".
Because the mapping depends only on real time, a process killed and restarted picks the
simulated time up where it would be, as a real clock would.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import time
from typing import Protocol

from agent.errors import UserError

CLOCK_VAR = "CLAWLOOP_CRON_CLOCK"


class Clock(Protocol):
    """What the scheduler needs of time: the current instant, and a wait until one."""

    def now(self) -> dt.datetime:
        """The current instant, timezone-aware (UTC)."""
        ...

    async def sleep_until(self, when: dt.datetime) -> None:
        """Return at ``when`` (at once if it has passed)."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    async def sleep_until(self, when: dt.datetime) -> None:
        await asyncio.sleep(max(0.0, (when - self.now()).total_seconds()))


class FastClock:
    """Simulated time running ``speed`` times faster than real time from ``start`` at ``epoch``."""

    def __init__(self, start: dt.datetime, epoch: float, speed: float) -> None:
        self.start = start
        self.epoch = epoch
        self.speed = speed

    def now(self) -> dt.datetime:
        return self.start + dt.timedelta(seconds=(time.time() - self.epoch) * self.speed)

    async def sleep_until(self, when: dt.datetime) -> None:
        await asyncio.sleep(max(0.0, (when - self.now()).total_seconds() / self.speed))

    def spec(self) -> str:
        """The value of ``CLAWLOOP_CRON_CLOCK`` that gives this clock to another process."""
        return f"{self.start.isoformat()}@{self.epoch!r}x{self.speed!r}"


def clock_from_env() -> Clock:
    """The fast clock ``CLAWLOOP_CRON_CLOCK`` describes, else the system clock."""
    spec = os.environ.get(CLOCK_VAR)
    if not spec:
        return SystemClock()
    try:
        start, _, rest = spec.partition("@")
        epoch, _, speed = rest.partition("x")
        when = dt.datetime.fromisoformat(start)
        if when.tzinfo is None:
            raise ValueError("no UTC offset")
        return FastClock(when, float(epoch), float(speed))
    except ValueError as exc:
        raise UserError(
            f"{CLOCK_VAR}={spec!r} is not START@EPOCHxSPEED "
            f"(e.g. 2024-03-30T00:00:00+00:00@1700000000x3600): {exc}"
        ) from None
