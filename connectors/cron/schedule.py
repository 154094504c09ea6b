"""When a job is due: a 5-field cron expression or a plain interval, in the user's time zone.

Cron fields are minute, hour, day of month, month, day of week (0 or 7 is Sunday), each ``*``,
a number, a range ``a-b``, a list ``a,b``, a step ``*/n`` or ``a-b/n``, and names (``jan``,
``mon``). As in Vixie cron, when both day fields are restricted a day matches either.

Times are wall-clock times in the schedule's zone (``zoneinfo``), so a daily 08:00 job stays at
08:00 across a change of daylight-saving time. At the spring change a time that does not exist
(02:30 when clocks jump from 02:00 to 03:00) runs once, shifted by the gap (03:30). At the autumn
change a repeated time runs once, the first time, unless the hour field is ``*`` (then the job
runs in both passes of the repeated hour, as it does every other hour).

Plain phrases: ``every 15m``, ``every 2h``, ``every 30 minutes`` (fixed elapsed intervals from
the job's anchor, the moment it was added), ``every day at 08:00``, ``every weekday at 9:30``,
``every monday at 18:00``, ``every hour`` (cron expressions underneath).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from agent.errors import UserError

UTC = dt.UTC
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
_BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_SEARCH_DAYS = 366 * 5  # long enough for 29 February on a given weekday


@dataclass(frozen=True, slots=True)
class CronExpr:
    """A parsed cron expression: the allowed values of each field."""

    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    days_restricted: bool
    weekdays_restricted: bool
    every_hour: bool

    def day_matches(self, day: dt.date) -> bool:
        if day.month not in self.months:
            return False
        in_month = day.day in self.days
        in_week = (day.isoweekday() % 7) in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return in_month or in_week
        return in_month and in_week


def parse_cron(text: str) -> CronExpr:
    """Parse a 5-field cron expression; a malformed one is a :class:`UserError`."""
    fields = text.split()
    if len(fields) != 5:
        raise UserError(f"cron expression {text!r} must have 5 fields: minute hour day month dow")
    pairs = enumerate(zip(fields, _BOUNDS, strict=True))
    values = [_field(f, lo, hi, i, text) for i, (f, (lo, hi)) in pairs]
    weekdays = frozenset(v % 7 for v in values[4])  # 7 is Sunday too
    return CronExpr(
        minutes=tuple(sorted(values[0])),
        hours=tuple(sorted(values[1])),
        days=frozenset(values[2]),
        months=frozenset(values[3]),
        weekdays=weekdays,
        days_restricted=not fields[2].startswith("*"),
        weekdays_restricted=not fields[4].startswith("*"),
        every_hour=len(values[1]) == 24,
    )


def _field(raw: str, lo: int, hi: int, index: int, text: str) -> set[int]:
    names = _MONTHS if index == 3 else _DAYS if index == 4 else []
    out: set[int] = set()
    for part in raw.lower().split(","):
        base, _, step_text = part.partition("/")
        step = _number(step_text, names, 0, text) if step_text else 1
        if base == "*":
            first, last = lo, hi
        elif "-" in base:
            a, _, b = base.partition("-")
            first, last = _number(a, names, lo, text), _number(b, names, lo, text)
        else:
            first = _number(base, names, lo, text)
            last = hi if step_text else first
        if not (lo <= first <= hi and lo <= last <= hi and first <= last and step >= 1):
            raise UserError(f"cron expression {text!r}: {part!r} is outside {lo}-{hi}")
        out.update(range(first, last + 1, step))
    return out


def _number(token: str, names: list[str], lo: int, text: str) -> int:
    if token in names:
        return names.index(token) + (1 if lo == 1 else 0)
    if not token.isdigit():
        raise UserError(f"cron expression {text!r}: {token!r} is not a number or a name")
    return int(token)


def cron_times(expr: CronExpr, tz: ZoneInfo, after: dt.datetime) -> dt.datetime | None:
    """The first instant strictly after ``after`` (aware) that matches ``expr``, in UTC."""
    # A repeated hour's second pass lies before the local time's first pass: look 3 h back, and
    # past the first match look 3 h on, since wall-clock order and real order differ only there.
    floor = (after.astimezone(tz) - dt.timedelta(hours=3)).replace(tzinfo=None)
    best: dt.datetime | None = None
    horizon: dt.datetime | None = None
    for naive in _wall_times(expr, floor):
        if horizon is not None and naive > horizon:
            break
        for when in _instants(naive, tz):
            if when > after and (best is None or when < best):
                best = when
                horizon = naive + dt.timedelta(hours=3)
    return best


def _wall_times(expr: CronExpr, floor: dt.datetime) -> Iterator[dt.datetime]:
    """The wall-clock times that match, in order, from ``floor`` on, for a few years."""
    day = floor.date()
    for _ in range(_SEARCH_DAYS):
        if expr.day_matches(day):
            for hour in expr.hours:
                if day == floor.date() and hour < floor.hour:
                    continue
                for minute in expr.minutes:
                    naive = dt.datetime.combine(day, dt.time(hour, minute))
                    if naive >= floor:
                        yield naive
        day += dt.timedelta(days=1)


def _instants(naive: dt.datetime, tz: ZoneInfo) -> list[dt.datetime]:
    first = naive.replace(tzinfo=tz, fold=0).astimezone(UTC)
    second = naive.replace(tzinfo=tz, fold=1).astimezone(UTC)
    if first == second or second < first:  # normal, or a gap: fold=0 is shifted past the gap
        return [first]
    return [first, second]  # a repeated wall-clock time: both passes, filtered by the caller


@dataclass(frozen=True, slots=True)
class Schedule:
    """A job's WHEN, parsed: a cron expression in a zone, or a fixed interval from an anchor."""

    text: str
    cron: CronExpr | None
    interval_s: int | None
    tz: ZoneInfo

    def next_after(self, after: dt.datetime, anchor: dt.datetime) -> dt.datetime | None:
        """The first slot strictly after ``after``; None if the expression never matches."""
        if self.interval_s is not None:
            elapsed = (after - anchor).total_seconds()
            steps = max(0, int(elapsed // self.interval_s) + 1)
            when = anchor + dt.timedelta(seconds=steps * self.interval_s)
            while when <= after:  # float rounding at an exact multiple
                when += dt.timedelta(seconds=self.interval_s)
            return when
        if self.cron is None:
            raise RuntimeError("a schedule has a cron expression or an interval")
        return _cron_next(self.cron, self.tz, after)

    def slots(self, start: dt.datetime, end: dt.datetime, anchor: dt.datetime) -> list[dt.datetime]:
        """Every slot in ``[start, end]`` (for accounting; a long range is a long list)."""
        out: list[dt.datetime] = []
        when: dt.datetime | None = start - dt.timedelta(microseconds=1)
        while (when := self.next_after(when, anchor)) is not None and when <= end:  # type: ignore[arg-type]
            out.append(when)
        return out


def _cron_next(expr: CronExpr, tz: ZoneInfo, after: dt.datetime) -> dt.datetime | None:
    when = cron_times(expr, tz, after)
    # A repeated hour's second pass counts only for jobs that run every hour.
    while when is not None and not expr.every_hour and _second_pass(when, tz):
        when = cron_times(expr, tz, when)
    return when


def _second_pass(when: dt.datetime, tz: ZoneInfo) -> bool:
    local = when.astimezone(tz)
    return local.replace(fold=0).astimezone(UTC) != when


_INTERVAL = re.compile(
    r"every\s+(\d+)\s*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hrs?|hours?|d|days?)"
)
_AT = re.compile(r"(?:every\s+(\w+)|daily)\s+at\s+(\d{1,2}):(\d{2})")


def parse_schedule(text: str, tz: ZoneInfo) -> Schedule:
    """Parse WHEN: a cron expression or a plain phrase; a bad one is a :class:`UserError`."""
    phrase = " ".join(text.lower().split())
    if phrase in ("every minute", "every hour", "hourly", "every day", "daily"):
        phrase = {"every minute": "* * * * *", "every day": "0 0 * * *", "daily": "0 0 * * *"}.get(
            phrase, "0 * * * *"
        )
    if match := _INTERVAL.fullmatch(phrase):
        seconds = int(match.group(1)) * _UNITS[match.group(2)[0]]
        if seconds < 60:
            raise UserError(f"{text!r}: the shortest interval is one minute")
        return Schedule(text, None, seconds, tz)
    if match := _AT.fullmatch(phrase):
        hour, minute = int(match.group(2)), int(match.group(3))
        if hour > 23 or minute > 59:
            raise UserError(f"{text!r}: {hour}:{minute:02d} is not a time of day")
        phrase = f"{minute} {hour} * * {_weekday_field(match.group(1), text)}"
    cron_like = all(re.fullmatch(r"[\d*,/-]+", token) for token in phrase.split())
    if len(phrase.split()) != 5 and not cron_like:
        raise UserError(
            f"cannot read the schedule {text!r}: use a cron expression such as '0 8 * * *' or "
            "a phrase such as 'every 15m', 'every 2h', 'every day at 08:00'"
        )
    expr = parse_cron(phrase)
    if _cron_next(expr, tz, dt.datetime(2000, 1, 1, tzinfo=UTC)) is None:
        raise UserError(f"the schedule {text!r} never matches a date")
    return Schedule(text, expr, None, tz)


def _weekday_field(word: str | None, text: str) -> str:
    if word in (None, "day"):
        return "*"
    if word == "weekday":
        return "1-5"
    if word == "weekend":
        return "0,6"
    for i, name in enumerate(_DAYS):
        if word.startswith(name):
            return str(i)
    raise UserError(f"{text!r}: {word!r} is not a day (use day, weekday, weekend or monday…)")


def zone(name: str | None) -> ZoneInfo:
    """The named zone, or the system's local zone; an unknown name is a :class:`UserError`."""
    from zoneinfo import ZoneInfoNotFoundError

    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise UserError(
                f"unknown time zone {name!r} in [cron] timezone: use a name such as "
                "'Europe/Paris' or 'UTC'"
            ) from None
    return _local_zone()


def _local_zone() -> ZoneInfo:
    import os
    from pathlib import Path

    env = os.environ.get("TZ", "").lstrip(":")
    candidates = [env] if env else []
    try:
        link = Path("/etc/localtime").resolve()
        if "zoneinfo/" in str(link):
            candidates.append(str(link).split("zoneinfo/", 1)[1])
    except OSError:
        pass
    for name in candidates:
        try:
            return ZoneInfo(name)
        except Exception:  # an odd TZ value: fall through to the next guess
            continue
    return ZoneInfo("UTC")
