"""Rules that can never match: BYSETPOS beyond the period's set is rejected up front, and
the search of next_occurrence is bounded (RECURRENCE_BUDGET_MS) for what validation cannot
see: running out is "too costly", never "ended", so sparse schedules keep their occurrences."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from dateutil.rrule import _iterinfo

from delivery.recurrence import InvalidRecurrence, RuleTooCostly, next_occurrence, validate_rrule
from tests.delivery.recurrence_support import GENEROUS, step_budget

BERLIN = ZoneInfo("Europe/Berlin")


def nxt(rrule, anchor, after, steps=GENEROUS):
    return next_occurrence(
        rrule=rrule,
        tz_name="Europe/Berlin",
        anchor=anchor,
        after=after,
        budget=step_budget(steps),
    )


def berlin(*args):
    return datetime(*args, tzinfo=BERLIN).astimezone(UTC)


LEAP_DAY = berlin(2024, 2, 29, 9)
AFTER_2096 = datetime(2096, 3, 1, tzinfo=UTC)


@pytest.fixture
def periods_examined(monkeypatch):
    """Counts the periods dateutil examines (it builds one day set per period): its work."""
    examined = []
    for name in ("ydayset", "mdayset", "wdayset", "ddayset"):
        original = getattr(_iterinfo, name)

        def counted(self, *args, _original=original):
            examined.append(1)
            return _original(self, *args)

        monkeypatch.setattr(_iterinfo, name, counted)
    return examined


@pytest.mark.parametrize(
    ("text", "period", "most"),
    [
        ("FREQ=WEEKLY;BYSETPOS=3;BYDAY=MO", "week", "1 occurrence"),
        ("FREQ=DAILY;BYHOUR=9;BYSETPOS=2", "day", "1 occurrence"),
        ("FREQ=WEEKLY;BYDAY=MO,TU;BYHOUR=9,17;BYSETPOS=-5", "week", "4 occurrences"),
        ("FREQ=MONTHLY;BYDAY=1MO,-1FR;BYSETPOS=3", "month", "2 occurrences"),
        ("FREQ=MONTHLY;BYMONTHDAY=1,15;BYDAY=MO;BYSETPOS=3", "month", "2 occurrences"),
        ("FREQ=MONTHLY;BYDAY=MO;BYSETPOS=6", "month", "5 occurrences"),
        ("FREQ=HOURLY;BYMINUTE=0,30;BYSETPOS=3", "hour", "2 occurrences"),
        ("FREQ=MINUTELY;BYHOUR=9;BYSETPOS=2", "minute", "1 occurrence"),
        ("FREQ=YEARLY;BYMONTH=1,7;BYSETPOS=3", "year", "2 occurrences"),
        ("FREQ=YEARLY;BYDAY=MO;BYSETPOS=54", "year", "53 occurrences"),
        ("FREQ=YEARLY;BYMONTH=3;BYDAY=2SU;BYSETPOS=2", "year", "1 occurrence"),
    ],
)
def test_bysetpos_beyond_the_periods_set_is_rejected(text, period, most):
    position = text.rpartition("BYSETPOS=")[2].split(";")[0]

    with pytest.raises(InvalidRecurrence) as raised:
        validate_rrule(text)

    assert str(raised.value) == (
        f"BYSETPOS={position} never matches: one {period} of this rule holds at most {most}"
    )


@pytest.mark.parametrize(
    ("text", "anchor"),
    [
        ("FREQ=MONTHLY;BYDAY=MO;BYSETPOS=5", berlin(2025, 1, 1, 9)),  # a fifth Monday
        ("FREQ=YEARLY;BYDAY=MO;BYSETPOS=-53", berlin(2025, 1, 1, 9)),
        ("FREQ=WEEKLY;BYDAY=MO,TU,WE;BYHOUR=9,17;BYSETPOS=6", berlin(2025, 1, 1, 9)),
        ("FREQ=YEARLY;BYMONTH=1,7;BYSETPOS=2", berlin(2025, 1, 15, 9)),
        (
            "FREQ=YEARLY;BYMONTH=1,2,3,4,5,6,7,8,9,10,11,12;BYDAY=1MO;BYSETPOS=12",
            berlin(2025, 1, 1, 9),
        ),
        ("FREQ=YEARLY;BYYEARDAY=1,100,366;BYSETPOS=-3", berlin(2025, 1, 1, 9)),
        ("FREQ=HOURLY;BYMINUTE=0,30;BYSECOND=0,30;BYSETPOS=-4", berlin(2025, 1, 1, 9)),
    ],
)
def test_bysetpos_at_the_edge_of_the_set_is_accepted_and_matches(text, anchor):
    validate_rrule(text)

    assert nxt(text, anchor, anchor) is not None


@pytest.mark.parametrize(
    ("text", "anchor"),
    [
        # The second Monday is never the 1st.
        ("FREQ=MONTHLY;BYDAY=2MO;BYMONTHDAY=1", berlin(2025, 1, 6, 9)),
        # Two set members exist only if the 1st and 2nd were both Mondays.
        ("FREQ=MONTHLY;BYDAY=MO;BYMONTHDAY=1,2;BYSETPOS=2", berlin(2025, 1, 6, 9)),
        ("FREQ=YEARLY;BYMONTH=1;BYYEARDAY=100", berlin(2025, 1, 6, 9)),
        # Every 7 days from a Monday is never a Tuesday.
        ("FREQ=DAILY;INTERVAL=7;BYDAY=TU", berlin(2025, 1, 6, 9)),
        ("FREQ=HOURLY;INTERVAL=168;BYDAY=TU", berlin(2025, 1, 6, 9)),
        ("FREQ=HOURLY;BYMONTH=1;BYYEARDAY=100", berlin(2025, 1, 6, 9)),
        ("FREQ=MINUTELY;BYMONTH=1;BYYEARDAY=100", berlin(2025, 1, 6, 9)),
    ],
)
def test_rule_that_never_matches_is_too_costly_after_a_bounded_search(
    text, anchor, periods_examined
):
    validate_rrule(text)

    with pytest.raises(RuleTooCostly, match="RECURRENCE_BUDGET_MS"):
        nxt(text, anchor, anchor + timedelta(days=3), steps=2_000)

    # Unbounded, dateutil would examine every period up to the year 9999 (for the DAILY
    # rule ~416,000 weeks, for the HOURLY and MINUTELY ones ~2.9 million days); each period
    # costs at least one step of the budget.
    assert 0 < len(periods_examined) <= 2_000


@pytest.mark.parametrize(
    ("text", "anchor", "after", "expected"),
    [
        # 29 February: 2100 is not a leap year, so 2096 is followed by 2104.
        (
            "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29",
            LEAP_DAY,
            berlin(2024, 3, 1),
            berlin(2028, 2, 29, 9),
        ),
        (
            "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29",
            LEAP_DAY,
            berlin(2096, 3, 1),
            berlin(2104, 2, 29, 9),
        ),
        (
            "FREQ=YEARLY;INTERVAL=4",
            berlin(2096, 2, 29, 9),
            berlin(2096, 3, 1),
            berlin(2104, 2, 29, 9),
        ),
        (
            "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29",
            LEAP_DAY,
            berlin(2096, 3, 1),
            berlin(2104, 2, 29, 9),
        ),
        (
            "FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=29",
            LEAP_DAY,
            AFTER_2096,
            datetime(2104, 2, 29, tzinfo=UTC),
        ),
        (
            "FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=29",
            LEAP_DAY,
            AFTER_2096,
            datetime(2104, 2, 29, tzinfo=UTC),
        ),
        # Friday the 13th: 14 months apart at most.
        (
            "FREQ=MONTHLY;BYDAY=FR;BYMONTHDAY=13",
            berlin(2025, 6, 13, 9),
            berlin(2025, 6, 14),
            berlin(2026, 2, 13, 9),
        ),
        (
            "FREQ=MONTHLY;BYDAY=FR;BYMONTHDAY=13",
            berlin(2025, 6, 13, 9),
            berlin(2027, 8, 14),
            berlin(2028, 10, 13, 9),
        ),
        # A 29 February that is a Monday: 20 years apart; a YEARLY walk reaches it.
        (
            "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO",
            LEAP_DAY,
            berlin(2024, 3, 1),
            berlin(2044, 2, 29, 9),
        ),
    ],
)
def test_sparse_rules_find_their_next_occurrence(text, anchor, after, expected):
    assert nxt(text, anchor, after) == expected


def test_a_next_occurrence_beyond_the_budget_is_too_costly_never_the_end():
    # A Monday 29 February walked day by day: 20 years away. With the budget for it, the
    # exact occurrence; without, too costly — never "the schedule has ended".
    rule = "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO"

    assert nxt(rule, LEAP_DAY, berlin(2024, 3, 1)) == berlin(2044, 2, 29, 9)
    with pytest.raises(RuleTooCostly):
        nxt(rule, LEAP_DAY, berlin(2024, 3, 1), steps=1_000)
    assert nxt(rule, LEAP_DAY, berlin(2044, 2, 28), steps=1_000) == berlin(2044, 2, 29, 9)


def test_a_count_rule_is_walked_from_its_anchor_to_its_end():
    anchor = datetime(2025, 1, 6, 8, 0, tzinfo=UTC)
    rule = "FREQ=MINUTELY;COUNT=10000"
    after = anchor + timedelta(minutes=9000)

    assert nxt(rule, anchor, after) == after + timedelta(minutes=1)
    assert nxt(rule, anchor, anchor + timedelta(minutes=9999)) is None
    with pytest.raises(RuleTooCostly):
        nxt(rule, anchor, after, steps=1_000)


def test_a_walk_that_reaches_the_calendars_end_within_the_budget_has_ended():
    # Every 4 years from 2025 never meets a leap year: dateutil walks to the year 9999 and
    # finds nothing, 1,995 steps of a year each, within a budget that pays for them.
    rule = "FREQ=YEARLY;INTERVAL=4;BYMONTH=2;BYMONTHDAY=29"

    assert nxt(rule, berlin(2025, 1, 6, 9), berlin(2025, 1, 9), steps=100_000) is None


@pytest.mark.parametrize("zone", ["Pacific/Kiritimati", "America/New_York", "UTC"])
def test_the_end_of_the_calendar_ends_the_schedule(zone):
    last = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)

    assert next_occurrence(rrule="FREQ=YEARLY", tz_name=zone, anchor=last, after=last) is None
