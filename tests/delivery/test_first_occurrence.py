"""first_occurrence: the rule's first instance at or after fire_at, as dateutil's DTSTART."""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from dateutil.rrule import rrulestr

from delivery.recurrence import first_occurrence

BERLIN = ZoneInfo("Europe/Berlin")
SUNDAY_EVENING = datetime(2031, 6, 1, 20, 15, tzinfo=BERLIN)
MONDAYS_AT_NINE = "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0"


def first(rrule, anchor, tz_name="Europe/Berlin"):
    return first_occurrence(rrule=rrule, tz_name=tz_name, anchor=anchor)


def test_an_anchor_off_the_rule_waits_for_the_rules_first_instance():
    assert first(MONDAYS_AT_NINE, SUNDAY_EVENING) == datetime(2031, 6, 2, 9, tzinfo=BERLIN)


def test_an_anchor_on_the_rule_is_the_first_occurrence_even_with_microseconds():
    monday_nine = datetime(2031, 6, 2, 9, 0, 0, 250_000, tzinfo=BERLIN)

    assert first(MONDAYS_AT_NINE, monday_nine) == monday_nine.replace(microsecond=0)


@pytest.mark.parametrize(
    ("rrule", "expected"),
    [
        ("FREQ=DAILY", SUNDAY_EVENING),
        ("FREQ=WEEKLY;BYDAY=MO", datetime(2031, 6, 2, 20, 15, tzinfo=BERLIN)),
        ("FREQ=MONTHLY;BYMONTHDAY=15", datetime(2031, 6, 15, 20, 15, tzinfo=BERLIN)),
        ("FREQ=HOURLY;BYMINUTE=30", datetime(2031, 6, 1, 20, 30, tzinfo=BERLIN)),
    ],
)
def test_parts_the_rule_does_not_give_come_from_the_anchor(rrule, expected):
    assert first(rrule, SUNDAY_EVENING) == expected


@pytest.mark.parametrize(
    "rrule",
    [MONDAYS_AT_NINE, "FREQ=DAILY;BYHOUR=7,19", "FREQ=MONTHLY;BYDAY=-1FR", "FREQ=YEARLY;COUNT=2"],
)
def test_agrees_with_dateutil_anchored_at_fire_at(rrule):
    wall = SUNDAY_EVENING.replace(tzinfo=None)
    expected = rrulestr(rrule, dtstart=wall)[0].replace(tzinfo=BERLIN)

    assert first(rrule, SUNDAY_EVENING) == expected


def test_a_rule_that_ends_before_the_anchor_has_no_first_occurrence():
    assert first("FREQ=DAILY;UNTIL=20310501T000000Z", SUNDAY_EVENING) is None
    assert first("FREQ=WEEKLY;BYDAY=MO;UNTIL=20310601", SUNDAY_EVENING) is None


def test_a_naive_anchor_is_refused():
    with pytest.raises(ValueError, match="aware"):
        first("FREQ=DAILY", datetime(2031, 6, 1, tzinfo=UTC).replace(tzinfo=None))
