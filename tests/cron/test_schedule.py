"""Reading WHEN: cron fields, plain phrases, time zones and the two daylight-saving changes."""

from __future__ import annotations

import datetime as dt
import itertools
from zoneinfo import ZoneInfo

import pytest

from agent.errors import UserError
from connectors.cron.schedule import parse_schedule

PARIS = ZoneInfo("Europe/Paris")
NEW_YORK = ZoneInfo("America/New_York")
UTC = dt.UTC


def utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


def local_times(when: str, tz: ZoneInfo, start: dt.datetime, count: int) -> list[str]:
    schedule = parse_schedule(when, tz)
    out, at = [], start
    for _ in range(count):
        nxt = schedule.next_after(at, start)
        assert nxt is not None
        out.append(nxt.astimezone(tz).strftime("%m-%d %H:%M %Z"))
        at = nxt
    return out


def test_a_daily_time_is_wall_clock_time_in_the_zone() -> None:
    assert local_times("0 8 * * *", PARIS, utc(2024, 6, 1, 12), 2) == [
        "06-02 08:00 CEST",
        "06-03 08:00 CEST",
    ]
    assert local_times("every day at 08:00", NEW_YORK, utc(2024, 6, 1, 12), 1) == [
        "06-02 08:00 EDT"
    ]


def test_fields_ranges_steps_lists_and_names() -> None:
    assert local_times("*/20 9-10 * * *", PARIS, utc(2024, 6, 3, 5), 7) == [
        "06-03 09:00 CEST",
        "06-03 09:20 CEST",
        "06-03 09:40 CEST",
        "06-03 10:00 CEST",
        "06-03 10:20 CEST",
        "06-03 10:40 CEST",
        "06-04 09:00 CEST",
    ]
    # 2024-06-01 is a Saturday: weekdays only, by name and by the phrase.
    assert local_times("30 9 * jun mon-fri", PARIS, utc(2024, 6, 1), 1) == ["06-03 09:30 CEST"]
    assert local_times("every weekday at 9:30", PARIS, utc(2024, 6, 1), 1) == ["06-03 09:30 CEST"]
    assert local_times("0 12 * * 7", PARIS, utc(2024, 6, 3), 1) == ["06-09 12:00 CEST"]  # Sunday
    # Both day fields restricted: either one matches (the 15th, or a Monday).
    assert local_times("0 0 15 * 1", UTC_ZONE, utc(2024, 6, 11), 3) == [
        "06-15 00:00 UTC",
        "06-17 00:00 UTC",
        "06-24 00:00 UTC",
    ]


UTC_ZONE = ZoneInfo("UTC")


def test_spring_forward_a_time_in_the_gap_runs_once_shifted_by_the_gap() -> None:
    # Paris, 2024-03-31: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist that night.
    assert local_times("30 2 * * *", PARIS, utc(2024, 3, 29, 12), 3) == [
        "03-30 02:30 CET",
        "03-31 03:30 CEST",
        "04-01 02:30 CEST",
    ]
    # Every quarter hour: the gap's times fold onto real ones, so each instant runs once.
    times = local_times("*/15 * * * *", PARIS, utc(2024, 3, 31, 0, 40), 4)
    assert times == ["03-31 01:45 CET", "03-31 03:00 CEST", "03-31 03:15 CEST", "03-31 03:30 CEST"]


def test_fall_back_a_repeated_time_runs_once_unless_the_job_runs_every_hour() -> None:
    # Paris, 2024-10-27: 03:00 CEST goes back to 02:00 CET; 02:30 happens twice.
    assert local_times("30 2 * * *", PARIS, utc(2024, 10, 26, 12), 2) == [
        "10-27 02:30 CEST",
        "10-28 02:30 CET",
    ]
    assert local_times("30 * * * *", PARIS, utc(2024, 10, 26, 23, 0), 4) == [
        "10-27 01:30 CEST",
        "10-27 02:30 CEST",
        "10-27 02:30 CET",
        "10-27 03:30 CET",
    ]


def test_an_interval_counts_real_time_from_its_anchor_across_the_change() -> None:
    anchor = utc(2024, 3, 30, 23, 10)
    schedule = parse_schedule("every 2h", PARIS)
    slots = schedule.slots(anchor, utc(2024, 3, 31, 5, 0), anchor)
    gaps = {b - a for a, b in itertools.pairwise(slots)}
    assert gaps == {dt.timedelta(hours=2)} and slots[0] == anchor
    assert schedule.next_after(utc(2024, 3, 31, 0), anchor) == utc(2024, 3, 31, 1, 10)
    assert parse_schedule("every 15 minutes", PARIS).interval_s == 900


@pytest.mark.parametrize(
    ("when", "says"),
    [
        ("* * * *", "5 fields"),
        ("61 * * * *", "outside 0-59"),
        ("0 8 * * funday", "not a number"),
        ("0 0 31 2 *", "never matches"),
        ("every 10s", "shortest interval"),
        ("every day at 25:00", "not a time of day"),
        ("tomorrow-ish", "cannot read the schedule"),
    ],
)
def test_a_bad_schedule_says_what_is_wrong(when: str, says: str) -> None:
    with pytest.raises(UserError, match=says):
        parse_schedule(when, PARIS)
