"""skipped_occurrences: what a late schedule jumped over, counted with bounded work."""

from datetime import UTC, datetime, timedelta

from delivery.recurrence import next_occurrence
from delivery.recurrence.skipped import SKIP_COUNT_CAP, next_and_skipped, skipped_occurrences
from tests.delivery.recurrence_support import GENEROUS, step_budget

ANCHOR = datetime(2025, 1, 1, 9, 0, tzinfo=UTC)


def skipped(rrule, *, after, through, tz_name="UTC", anchor=ANCHOR, steps=GENEROUS):
    return skipped_occurrences(
        rrule=rrule,
        tz_name=tz_name,
        anchor=anchor,
        after=after,
        through=through,
        budget=step_budget(steps),
    )


def walked(rrule, *, after, through, tz_name="UTC"):
    """Reference: every occurrence in (after, through], one next_occurrence at a time."""
    found, cursor = [], after
    while cursor := next_occurrence(rrule=rrule, tz_name=tz_name, anchor=ANCHOR, after=cursor):
        if cursor > through:
            break
        found.append(cursor)
    return found


def test_a_minutely_row_handled_ten_minutes_late_skipped_the_ten_minutes_after_it():
    found = skipped("FREQ=MINUTELY", after=ANCHOR, through=ANCHOR + timedelta(minutes=10))

    assert (found.count, found.first, found.last) == (
        10,
        ANCHOR + timedelta(minutes=1),
        ANCHOR + timedelta(minutes=10),
    )


def test_nothing_skipped_when_handled_before_the_next_occurrence():
    assert skipped("FREQ=MINUTELY", after=ANCHOR, through=ANCHOR + timedelta(seconds=59)) is None
    assert skipped("FREQ=DAILY", after=ANCHOR, through=ANCHOR + timedelta(hours=23)) is None


def test_a_minutely_rule_parked_for_a_year_is_counted_exactly_and_at_once():
    through = ANCHOR + timedelta(days=365, seconds=30)

    found = skipped("FREQ=MINUTELY;INTERVAL=5", after=ANCHOR, through=through)

    assert found.count == 365 * 24 * 12
    assert found.last == ANCHOR + timedelta(days=365)


def test_a_narrowed_rule_is_walked_up_to_the_cap_and_reads_at_least():
    found = skipped("FREQ=MINUTELY;BYHOUR=9,10", after=ANCHOR, through=ANCHOR + timedelta(days=365))

    assert found.count == SKIP_COUNT_CAP
    assert found.first == ANCHOR + timedelta(minutes=1)
    assert (
        found.last
        == walked("FREQ=MINUTELY;BYHOUR=9,10", after=ANCHOR, through=ANCHOR + timedelta(days=30))[
            SKIP_COUNT_CAP - 1
        ]
    )


def test_a_spent_budget_stops_the_count_which_then_reads_at_least():
    through = ANCHOR + timedelta(days=365)

    found = skipped("FREQ=MINUTELY;BYHOUR=9,10", after=ANCHOR, through=through, steps=600)

    assert 1 <= found.count < SKIP_COUNT_CAP
    assert found.first == ANCHOR + timedelta(minutes=1)
    everything = walked(
        "FREQ=MINUTELY;BYHOUR=9,10", after=ANCHOR, through=through - timedelta(days=330)
    )
    assert found.last == everything[found.count - 1]


def test_counts_match_the_walk_across_dst_count_and_until():
    after = datetime(2025, 3, 20, 7, 30, tzinfo=UTC)
    through = datetime(2025, 4, 12, 7, 30, tzinfo=UTC)  # across Berlin's and New York's DST
    for rrule in (
        "FREQ=DAILY;BYHOUR=2;BYMINUTE=30",
        "FREQ=WEEKLY;BYDAY=MO,WE",
        "FREQ=HOURLY;INTERVAL=5",
        "FREQ=DAILY;COUNT=90",
        "FREQ=HOURLY;UNTIL=20250401T000000Z",
    ):
        for tz_name in ("Europe/Berlin", "America/New_York"):
            expected = walked(rrule, after=after, through=through, tz_name=tz_name)
            found = skipped(rrule, after=after, through=through, tz_name=tz_name)
            assert (found.count, found.first, found.last) == (
                len(expected),
                expected[0],
                expected[-1],
            ), (rrule, tz_name)


def test_an_ended_schedule_counts_only_what_it_had_left():
    found = skipped("FREQ=DAILY;COUNT=3", after=ANCHOR, through=ANCHOR + timedelta(days=30))

    assert (found.count, found.last) == (2, ANCHOR + timedelta(days=2))


def test_next_and_skipped_agrees_with_its_two_halves():
    handled = datetime(2025, 3, 28, 8, 0, tzinfo=UTC)
    for rrule in ("FREQ=DAILY", "FREQ=HOURLY;INTERVAL=3", "FREQ=DAILY;COUNT=90"):
        for late in (timedelta(0), timedelta(hours=2), timedelta(days=3, minutes=1)):
            now = handled + late
            upcoming, found = next_and_skipped(
                rrule=rrule, tz_name="Europe/Berlin", anchor=ANCHOR, handled=handled, now=now
            )

            assert upcoming == next_occurrence(
                rrule=rrule, tz_name="Europe/Berlin", anchor=ANCHOR, after=now
            )
            assert found == skipped(rrule, after=handled, through=now, tz_name="Europe/Berlin")
