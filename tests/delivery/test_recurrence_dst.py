"""DST transitions pinned in three zones: wall-clock rules keep local time, sub-daily rules
keep real elapsed time."""

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from delivery.recurrence import next_occurrence

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
SYDNEY = ZoneInfo("Australia/Sydney")


def local(zone, *args, fold=0):
    return datetime(*args, tzinfo=zone, fold=fold)


def occurrences(rrule, zone, anchor, count):
    """The `count` occurrences after `anchor`, each asked with after = the previous one."""
    found, current = [], anchor
    for _ in range(count):
        current = next_occurrence(rrule=rrule, tz_name=zone.key, anchor=anchor, after=current)
        assert current is not None
        found.append(current)
    return found


def wall_times(instants, zone):
    return [i.astimezone(zone).strftime("%m-%d %H:%M %Z") for i in instants]


@pytest.mark.parametrize(
    ("zone", "spring_day", "fall_day"),
    [
        (BERLIN, (2025, 3, 27), (2025, 10, 24)),
        (NEW_YORK, (2025, 3, 7), (2025, 10, 31)),
        (SYDNEY, (2025, 10, 2), (2025, 4, 3)),
    ],
)
def test_daily_nine_oclock_stays_nine_oclock_local(zone, spring_day, fall_day):
    for day in (spring_day, fall_day):
        anchor = local(zone, *day, 9, 0)
        found = occurrences("FREQ=DAILY", zone, anchor, 6)
        assert [i.astimezone(zone).time().isoformat() for i in found] == ["09:00:00"] * 6
        offsets = {i.astimezone(zone).utcoffset() for i in found}
        assert len(offsets) == 2  # the change really happened inside the walk
        assert all(i.tzinfo is UTC for i in found)


@pytest.mark.parametrize(
    ("zone", "anchor_day", "gap_day", "expected_utc"),
    [
        (BERLIN, (2025, 3, 28), 30, datetime(2025, 3, 30, 1, 30, tzinfo=UTC)),
        (NEW_YORK, (2025, 3, 7), 9, datetime(2025, 3, 9, 7, 30, tzinfo=UTC)),
        (SYDNEY, (2025, 10, 3), 5, datetime(2025, 10, 4, 16, 30, tzinfo=UTC)),
    ],
)
def test_daily_time_inside_spring_forward_gap_moves_forward_by_the_gap(
    zone, anchor_day, gap_day, expected_utc
):
    anchor = local(zone, *anchor_day, 2, 30)
    found = occurrences("FREQ=DAILY", zone, anchor, 4)

    on_gap_day = [i for i in found if i.astimezone(zone).day == gap_day]
    assert on_gap_day == [expected_utc]
    assert on_gap_day[0].astimezone(zone).strftime("%H:%M") == "03:30"
    after_gap = [i.astimezone(zone).strftime("%H:%M") for i in found if i > expected_utc]
    assert after_gap and set(after_gap) == {"02:30"}


@pytest.mark.parametrize(
    ("zone", "anchor_day", "fold_day", "first_utc"),
    [
        (NEW_YORK, (2025, 10, 31), (2025, 11, 2), datetime(2025, 11, 2, 5, 30, tzinfo=UTC)),
        (BERLIN, (2025, 10, 24), (2025, 10, 26), datetime(2025, 10, 26, 0, 30, tzinfo=UTC)),
    ],
)
def test_daily_time_repeated_by_fall_back_fires_once_at_the_first(
    zone, anchor_day, fold_day, first_utc
):
    hour = 1 if zone is NEW_YORK else 2
    anchor = local(zone, *anchor_day, hour, 30)
    found = occurrences("FREQ=DAILY", zone, anchor, 4)

    on_fold_day = [i for i in found if i.astimezone(zone).date() == datetime(*fold_day).date()]
    assert on_fold_day == [first_utc]
    second_pass = local(zone, *fold_day, hour, 30, fold=1).astimezone(UTC)
    assert second_pass not in found
    assert next_occurrence(
        rrule="FREQ=DAILY", tz_name=zone.key, anchor=anchor, after=first_utc
    ) == local(zone, *fold_day, hour, 30).astimezone(UTC) + timedelta(days=1, hours=1)


@pytest.mark.parametrize(
    ("zone", "anchor"),
    [
        (BERLIN, datetime(2025, 3, 29, 23, 15, tzinfo=UTC)),
        (BERLIN, datetime(2025, 10, 25, 22, 15, tzinfo=UTC)),
        (NEW_YORK, datetime(2025, 3, 9, 4, 15, tzinfo=UTC)),
        (NEW_YORK, datetime(2025, 11, 2, 3, 15, tzinfo=UTC)),
        (SYDNEY, datetime(2025, 4, 5, 13, 15, tzinfo=UTC)),
        (SYDNEY, datetime(2025, 10, 4, 13, 15, tzinfo=UTC)),
    ],
)
def test_hourly_follows_real_elapsed_time_across_transitions(zone, anchor):
    found = occurrences("FREQ=HOURLY", zone, anchor, 8)

    assert found == [anchor + timedelta(hours=n) for n in range(1, 9)]
    assert len({i.astimezone(zone).utcoffset() for i in found}) == 2


def test_hourly_repeats_the_local_hour_that_happens_twice():
    anchor = local(NEW_YORK, 2025, 11, 2, 0, 15)
    found = occurrences("FREQ=HOURLY", NEW_YORK, anchor, 3)

    assert wall_times(found, NEW_YORK) == [
        "11-02 01:15 EDT",
        "11-02 01:15 EST",
        "11-02 02:15 EST",
    ]


def test_hourly_skips_no_real_hour_in_spring_forward():
    anchor = local(BERLIN, 2025, 3, 30, 0, 45)
    found = occurrences("FREQ=HOURLY", BERLIN, anchor, 3)

    assert wall_times(found, BERLIN) == [
        "03-30 01:45 CET",
        "03-30 03:45 CEST",
        "03-30 04:45 CEST",
    ]


def test_weekly_monday_nine_berlin_stays_nine_across_both_changes():
    rule = "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0;BYSECOND=0"
    for anchor in (local(BERLIN, 2025, 3, 17, 9, 0), local(BERLIN, 2025, 10, 13, 9, 0)):
        found = occurrences(rule, BERLIN, anchor, 4)
        assert all(i.astimezone(BERLIN).strftime("%a %H:%M") == "Mon 09:00" for i in found)
        days = [i.astimezone(BERLIN).date() for i in [anchor, *found]]
        assert [(b - a).days for a, b in itertools.pairwise(days)] == [7] * 4
        assert len({i.astimezone(BERLIN).utcoffset() for i in found}) == 2


def test_two_wall_times_that_meet_in_a_gap_give_one_instant():
    # 02:30 (moved to 03:30) and 03:30 are the same instant on spring-forward day.
    rule = "FREQ=DAILY;BYHOUR=2,3;BYMINUTE=30"
    anchor = local(BERLIN, 2025, 3, 29, 3, 30)
    found = occurrences(rule, BERLIN, anchor, 3)

    assert wall_times(found, BERLIN) == [
        "03-30 03:30 CEST",
        "03-31 02:30 CEST",
        "03-31 03:30 CEST",
    ]


def test_gap_time_is_found_when_after_lies_inside_the_moved_hour():
    # 02:30 lands at 03:30 CEST; asked at 03:10 CEST it is still ahead.
    anchor = local(NEW_YORK, 2025, 3, 8, 2, 30)
    after = local(NEW_YORK, 2025, 3, 9, 3, 10)

    found = next_occurrence(rrule="FREQ=DAILY", tz_name=NEW_YORK.key, anchor=anchor, after=after)

    assert found == local(NEW_YORK, 2025, 3, 9, 3, 30).astimezone(UTC)
