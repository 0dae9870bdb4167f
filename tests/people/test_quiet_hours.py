"""Send windows, pure: the next opening of a recipient's window in their zone, across the
DST changes of two zones that have them (Europe/Berlin, America/New_York) and one that
does not (Asia/Kolkata)."""

from datetime import UTC, datetime

import pytest

from people.quiet_hours import DAYS, next_opening, window_errors

WEEKDAYS_9_TO_17 = {"days": ["MO", "TU", "WE", "TH", "FR"], "from": "09:00", "until": "17:00"}
EVERY_DAY_8_TO_20 = {"days": list(DAYS), "from": "08:00", "until": "20:00"}


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def test_inside_the_window_there_is_no_wait():
    # Tuesday 2026-03-10 10:00 in Berlin (CET, UTC+1) is 09:00 UTC.
    assert next_opening(WEEKDAYS_9_TO_17, "Europe/Berlin", utc(2026, 3, 10, 9, 0)) is None


def test_no_window_never_waits():
    assert next_opening(None, "Europe/Berlin", utc(2026, 3, 10, 3, 0)) is None


def test_the_window_closes_at_until_and_reopens_the_next_day():
    # 17:00 Berlin exactly: closed; opens Wednesday 09:00 CET = 08:00 UTC.
    assert next_opening(WEEKDAYS_9_TO_17, "Europe/Berlin", utc(2026, 3, 10, 16, 0)) == utc(
        2026, 3, 11, 8, 0
    )


def test_friday_evening_waits_for_monday():
    # Friday 2026-03-13 19:00 New York (EDT since March 8, UTC-4) → Monday 09:00 EDT.
    assert next_opening(WEEKDAYS_9_TO_17, "America/New_York", utc(2026, 3, 13, 23, 0)) == utc(
        2026, 3, 16, 13, 0
    )


@pytest.mark.parametrize(
    ("zone", "now", "opens"),
    [
        # Berlin springs forward on Sunday 2026-03-29: 08:00 that day is CEST (UTC+2),
        # the evening before it was CET (UTC+1).
        ("Europe/Berlin", utc(2026, 3, 28, 20, 0), utc(2026, 3, 29, 6, 0)),
        # Berlin falls back on Sunday 2026-10-25: 08:00 that day is CET again.
        ("Europe/Berlin", utc(2026, 10, 24, 19, 0), utc(2026, 10, 25, 7, 0)),
        # New York springs forward on Sunday 2026-03-08 (EST → EDT, UTC-4).
        ("America/New_York", utc(2026, 3, 8, 3, 0), utc(2026, 3, 8, 12, 0)),
        # New York falls back on Sunday 2026-11-01 (EDT → EST, UTC-5).
        ("America/New_York", utc(2026, 11, 1, 3, 0), utc(2026, 11, 1, 13, 0)),
        # Kolkata has no DST: 08:00 IST is 02:30 UTC every day.
        ("Asia/Kolkata", utc(2026, 3, 29, 0, 0), utc(2026, 3, 29, 2, 30)),
        ("Asia/Kolkata", utc(2026, 10, 25, 15, 0), utc(2026, 10, 26, 2, 30)),
        ("UTC", utc(2026, 10, 25, 21, 0), utc(2026, 10, 26, 8, 0)),
    ],
)
def test_the_next_opening_is_local_08_00_across_dst_changes(zone, now, opens):
    assert next_opening(EVERY_DAY_8_TO_20, zone, now) == opens


def test_a_window_opening_in_the_spring_forward_gap_opens_when_the_clock_jumps():
    # 02:30 does not exist in Berlin on 2026-03-29: the window opens at 03:30 CEST = 01:30 UTC.
    window = {"days": ["SU"], "from": "02:30", "until": "05:00"}
    assert next_opening(window, "Europe/Berlin", utc(2026, 3, 28, 12, 0)) == utc(2026, 3, 29, 1, 30)
    assert next_opening(window, "Europe/Berlin", utc(2026, 3, 29, 1, 45)) is None


def test_a_window_opening_at_a_repeated_time_opens_at_the_first():
    # 01:30 happens twice in New York on 2026-11-01: first at 05:30 UTC (EDT).
    window = {"days": ["SU"], "from": "01:30", "until": "04:00"}
    now = utc(2026, 10, 31, 12, 0)
    assert next_opening(window, "America/New_York", now) == utc(2026, 11, 1, 5, 30)


def test_an_overnight_window_runs_past_midnight():
    night = {"days": ["MO"], "from": "22:00", "until": "06:00"}
    # Tuesday 03:00 UTC is still Monday night's window.
    assert next_opening(night, "UTC", utc(2026, 3, 10, 3, 0)) is None
    assert next_opening(night, "UTC", utc(2026, 3, 10, 7, 0)) == utc(2026, 3, 16, 22, 0)


@pytest.mark.parametrize(
    "window",
    [
        {"days": [], "from": "09:00", "until": "17:00"},
        {"days": ["XX"], "from": "09:00", "until": "17:00"},
        {"days": ["MO", "MO"], "from": "09:00", "until": "17:00"},
        {"days": ["MO"], "from": "9:00", "until": "17:00"},
        {"days": ["MO"], "from": "24:00", "until": "17:00"},
        {"days": ["MO"], "from": "09:00", "until": "09:00"},
        {"days": ["MO"], "from": "09:00"},
        {"days": ["MO"], "from": "09:00", "until": "17:00", "extra": 1},
        ["MO"],
    ],
)
def test_malformed_windows_are_refused(window):
    assert window_errors(window)
