"""next_occurrence: late ticks, COUNT/UNTIL, old schedules, validation, and parity with a
reference that walks the whole rule from its anchor."""

import random
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from dateutil.rrule import rrulestr

from delivery.recurrence import (
    InvalidRecurrence,
    next_occurrence,
    validate_rrule,
    validate_timezone,
)
from tests.delivery.recurrence_support import GENEROUS, step_budget

BERLIN = ZoneInfo("Europe/Berlin")


def nxt(rrule, anchor, after, tz_name="Europe/Berlin"):
    return next_occurrence(
        rrule=rrule, tz_name=tz_name, anchor=anchor, after=after, budget=step_budget(GENEROUS)
    )


def test_late_tick_fires_once_then_skips_the_missed_occurrences():
    anchor = datetime(2025, 1, 6, 8, 0, tzinfo=UTC)  # 09:00 Berlin
    now = datetime(2025, 1, 9, 12, 0, tzinfo=UTC)  # three daily occurrences missed

    found = nxt("FREQ=DAILY", anchor, now)

    assert found == datetime(2025, 1, 10, 8, 0, tzinfo=UTC)


def test_never_returns_an_instant_at_or_before_after():
    anchor = datetime(2025, 1, 6, 8, 0, tzinfo=UTC)
    on_an_occurrence = datetime(2025, 1, 8, 8, 0, tzinfo=UTC)

    assert nxt("FREQ=DAILY", anchor, on_an_occurrence) == on_an_occurrence + timedelta(days=1)
    assert nxt("FREQ=DAILY", anchor, anchor) == anchor + timedelta(days=1)


def test_nothing_at_or_before_the_anchor_is_returned():
    anchor = datetime(2025, 1, 8, 8, 0, tzinfo=UTC)  # a Wednesday
    before = anchor - timedelta(days=30)

    found = nxt("FREQ=WEEKLY;BYDAY=MO,WE", anchor, before)

    assert found == datetime(2025, 1, 13, 8, 0, tzinfo=UTC)


def test_minutely_rule_anchored_five_years_ago_gives_the_next_minute():
    anchor = datetime(2020, 6, 1, 12, 0, 30, tzinfo=UTC)
    now = datetime(2025, 6, 1, 12, 34, 56, 789, tzinfo=UTC)

    assert nxt("FREQ=MINUTELY", anchor, now) == datetime(2025, 6, 1, 12, 35, 30, tzinfo=UTC)
    assert nxt("FREQ=MINUTELY;INTERVAL=7", anchor, now) == datetime(
        2025, 6, 1, 12, 40, 30, tzinfo=UTC
    )


def test_interval_alignment_is_kept_years_later():
    anchor = datetime(2021, 2, 3, 8, 0, tzinfo=UTC)  # a Wednesday
    now = datetime(2025, 7, 1, 0, 0, tzinfo=UTC)

    found = nxt("FREQ=WEEKLY;INTERVAL=3", anchor, now)

    assert found.astimezone(BERLIN).strftime("%a %H:%M") == "Wed 09:00"
    assert (found.astimezone(BERLIN).date() - anchor.astimezone(BERLIN).date()).days % 21 == 0
    assert found - timedelta(days=21) <= now < found


def test_count_ends_the_schedule():
    anchor = datetime(2025, 1, 6, 8, 0, tzinfo=UTC)
    rule = "FREQ=DAILY;COUNT=3"

    assert nxt(rule, anchor, anchor) == anchor + timedelta(days=1)
    assert nxt(rule, anchor, anchor + timedelta(days=1)) == anchor + timedelta(days=2)
    assert nxt(rule, anchor, anchor + timedelta(days=2)) is None
    assert nxt(rule, anchor, anchor + timedelta(days=400)) is None


@pytest.mark.parametrize(
    ("until", "last"),
    [
        ("20250110T080000Z", datetime(2025, 1, 10, 8, 0, tzinfo=UTC)),  # UTC, inclusive
        ("20250110T075959Z", datetime(2025, 1, 9, 8, 0, tzinfo=UTC)),
        ("20250110T090000", datetime(2025, 1, 10, 8, 0, tzinfo=UTC)),  # Berlin wall time
        ("20250110", datetime(2025, 1, 10, 8, 0, tzinfo=UTC)),  # the whole local day
    ],
)
def test_until_ends_the_schedule(until, last):
    anchor = datetime(2025, 1, 6, 8, 0, tzinfo=UTC)
    rule = f"FREQ=DAILY;UNTIL={until}"

    assert nxt(rule, anchor, last - timedelta(seconds=1)) == last
    assert nxt(rule, anchor, last) is None
    assert nxt(rule, anchor, last + timedelta(days=1000)) is None


def test_until_in_utc_ends_a_sub_daily_schedule():
    anchor = datetime(2025, 1, 6, 8, 0, tzinfo=UTC)
    rule = "FREQ=HOURLY;INTERVAL=2;UNTIL=20250106T130000Z"

    assert nxt(rule, anchor, anchor + timedelta(hours=3)) == anchor + timedelta(hours=4)
    assert nxt(rule, anchor, anchor + timedelta(hours=4)) is None


def test_rule_that_selects_nothing_for_its_anchor_has_ended():
    # Every 6 hours from 08:00 UTC never reaches 09:00.
    anchor = datetime(2025, 1, 6, 8, 0, tzinfo=UTC)

    assert nxt("FREQ=HOURLY;INTERVAL=6;BYHOUR=9", anchor, anchor) is None


def test_monthly_rule_inheriting_a_day_no_listed_month_has_ended():
    anchor = datetime(2025, 1, 30, 8, 0, tzinfo=UTC)  # the 30th: never in February

    assert nxt("FREQ=MONTHLY;BYMONTH=2", anchor, anchor) is None
    assert nxt("FREQ=MONTHLY;BYMONTH=2,3", anchor, anchor) == datetime(
        2025, 3, 30, 7, 0, tzinfo=UTC
    )


@pytest.mark.parametrize(
    "text",
    [
        "FREQ=DAILY",
        "RRULE:FREQ=WEEKLY;BYDAY=MO,WE;BYHOUR=9;BYMINUTE=0",
        "freq=monthly;byday=-1fr",
        "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
        "FREQ=YEARLY;BYMONTH=3;BYDAY=2SU;COUNT=5",
        "FREQ=MINUTELY;INTERVAL=15;UNTIL=20270101T000000Z",
        "FREQ=DAILY;UNTIL=20270101",
    ],
)
def test_validate_rrule_accepts_good_rules(text):
    validate_rrule(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "rrule must be a non-empty RRULE line such as 'FREQ=DAILY'"),
        ("FREQ=SECONDLY", "FREQ=SECONDLY is not supported: the scheduler runs once a minute"),
        ("INTERVAL=2", "rrule needs FREQ set to one of YEARLY, MONTHLY, WEEKLY, DAILY, HOURLY"),
        ("FREQ=DAILY;COUNT=0", "COUNT must be a whole number from 1 to 10000"),
        ("FREQ=DAILY;INTERVAL=0", "INTERVAL must be a whole number from 1 to 10000"),
        ("FREQ=DAILY;COUNT=3;UNTIL=20270101T000000Z", "rrule may have COUNT or UNTIL, not both"),
        ("DTSTART:20250101T090000Z", "unsupported property 'DTSTART'"),
        ("EXDATE:20250101T090000Z", "unsupported property 'EXDATE'"),
        ("DTSTART:20250101T090000Z\nRRULE:FREQ=DAILY", "rrule must be a single RRULE line"),
        ("FREQ=DAILY;BYEASTER=0", "unknown rrule part 'BYEASTER'"),
        ("FREQ=DAILY;FREQ=WEEKLY", "rrule part FREQ is given twice"),
        ("FREQ=DAILY;BYHOUR=24", "BYHOUR must be a comma-separated list of 0..23"),
        ("FREQ=MONTHLY;BYMONTHDAY=0", "BYMONTHDAY must be a comma-separated list of -31..-1"),
        ("FREQ=DAILY;BYDAY=XX", "BYDAY must be a comma-separated list of MO, TU"),
        ("FREQ=WEEKLY;BYDAY=1MO", "numbered BYDAY values (e.g. 1MO) need FREQ=MONTHLY"),
        ("FREQ=MONTHLY;BYWEEKNO=3", "BYWEEKNO needs FREQ=YEARLY"),
        ("FREQ=MONTHLY;BYSETPOS=1", "BYSETPOS needs another BY rule part"),
        ("FREQ=DAILY;UNTIL=tomorrow", "UNTIL must look like 20270101T000000Z (UTC)"),
        ("FREQ=DAILY;UNTIL=20271301", "UNTIL must look like"),
        ("FREQ", "rrule part 'FREQ' must look like NAME=VALUE"),
        ("FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30", "BYMONTHDAY never falls in the BYMONTH months"),
        ("FREQ=YEARLY;BYMONTH=4,6;BYMONTHDAY=-31", "BYMONTHDAY never falls in the BYMONTH"),
    ],
)
def test_validate_rrule_rejects_bad_rules_with_a_clear_message(text, message):
    with pytest.raises(InvalidRecurrence) as raised:
        validate_rrule(text)

    assert str(raised.value).startswith(message)


def test_validate_timezone():
    for good in ("Europe/Berlin", "UTC", "Etc/UTC", "US/Eastern", "America/Argentina/Salta"):
        validate_timezone(good)
    not_iana = ("localtime", "posixrules", "posix/Europe/Berlin", "right/UTC", "Factory")
    for bad in ("Mars/Olympus", "", "Europe", "../etc/passwd", "/etc/localtime", " UTC", *not_iana):
        with pytest.raises(InvalidRecurrence) as raised:
            validate_timezone(bad)
        assert str(raised.value) == f"unknown time zone '{bad}'"


def test_next_occurrence_rejects_invalid_input():
    anchor = datetime(2025, 1, 6, 8, 0, tzinfo=UTC)
    with pytest.raises(InvalidRecurrence):
        nxt("FREQ=DAILY", anchor, anchor, tz_name="Nowhere/Else")
    with pytest.raises(InvalidRecurrence):
        nxt("FREQ=SECONDLY", anchor, anchor)
    with pytest.raises(ValueError, match="timezone-aware"):
        nxt("FREQ=DAILY", anchor, anchor.replace(tzinfo=None))


# Parity: the re-anchored search must agree with a walk of the whole rule from its anchor.

ZONES = ["Europe/Berlin", "America/New_York", "Australia/Sydney", "Asia/Kolkata", "UTC"]
UNITS = {"YEARLY": 366, "MONTHLY": 31, "WEEKLY": 7, "DAILY": 1, "HOURLY": 1 / 24}
UNITS["MINUTELY"] = 1 / 1440
DAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]


def reference(text, tz_name, anchor, after):
    """Walk every occurrence from the anchor; same frames and fold=0 localisation."""
    freq = text.split("FREQ=")[1].split(";")[0]
    frame = UTC if freq in ("HOURLY", "MINUTELY") else ZoneInfo(tz_name)
    core, _, until = text.partition(";UNTIL=")
    if ("BYHOUR=" in core or "BYMINUTE=" in core) and "BYSECOND=" not in core:
        core += ";BYSECOND=0"  # the documented second 0 of a rule naming the time of day
    until_wall = None
    if until:
        until_utc = datetime.strptime(until, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        until_wall = until_utc.astimezone(frame).replace(tzinfo=None)
    start = anchor.astimezone(frame).replace(tzinfo=None)
    try:
        rule = rrulestr(core, dtstart=start).replace(until=until_wall, wkst=0)
        threshold, found, first_wall = max(after, anchor), [], None
        for wall in rule:
            if first_wall is not None and wall > first_wall + timedelta(days=2):
                break
            instant = wall.replace(tzinfo=frame).astimezone(UTC)
            if instant > threshold:
                found.append(instant)
                first_wall = first_wall or wall
    except ValueError:
        return None
    return min(found, default=None)


def random_rule(rng):
    freq = rng.choice(list(UNITS))
    parts = [f"FREQ={freq}", f"INTERVAL={rng.choice([1, 1, 2, 3, 5])}"]
    daily_or_coarser = freq not in ("HOURLY", "MINUTELY")
    if freq in ("WEEKLY", "MONTHLY", "DAILY", "YEARLY") and rng.random() < 0.5:
        days = rng.sample(DAYS, rng.randint(1, 3))
        if freq in ("MONTHLY", "YEARLY") and rng.random() < 0.5:
            days = [f"{rng.choice([1, 2, -1])}{days[0]}"]
        parts.append("BYDAY=" + ",".join(days))
        if freq in ("MONTHLY", "WEEKLY") and len(days) > 1 and rng.random() < 0.5:
            parts.append(f"BYSETPOS={rng.choice([1, -1])}")
    elif freq in ("MONTHLY", "DAILY") and rng.random() < 0.3:
        parts.append(f"BYMONTHDAY={rng.choice([1, 15, 28, -1])}")
    if daily_or_coarser and rng.random() < 0.4:
        parts.append("BYHOUR=" + ",".join(map(str, sorted(rng.sample(range(24), 2)))))
    if freq != "MINUTELY" and rng.random() < 0.3:
        parts.append(f"BYMINUTE={rng.choice([0, 30, 45])}")
    if rng.random() < 0.15:
        parts.append(f"COUNT={rng.randint(1, 40)}")
    elif rng.random() < 0.15:
        parts.append(f"UNTIL={2025 + rng.randint(0, 3)}0{rng.randint(1, 9)}15T103000Z")
    return freq, ";".join(parts)


def random_case(rng):
    freq, text = random_rule(rng)
    anchor = datetime(2020, 1, 1, tzinfo=UTC) + timedelta(minutes=rng.randrange(6 * 525_600))
    if rng.random() < 0.5:  # land near the small hours, where DST changes happen
        anchor = anchor.replace(hour=rng.choice([0, 1, 2, 3]))
    anchor = anchor.replace(second=rng.choice([0, 0, 17]))
    # Keep the reference walk short: a few thousand periods at most.
    horizon_days = min(3 * 365, UNITS[freq] * 3000)
    after = anchor + timedelta(days=rng.uniform(-2, horizon_days))
    return text, rng.choice(ZONES), anchor, after


def test_fast_search_matches_a_full_walk_from_the_anchor():
    rng = random.Random(20250601)
    for _ in range(300):
        text, tz_name, anchor, after = random_case(rng)
        expected = reference(text, tz_name, anchor, after)
        # A budget of dateutil's steps, not of this machine's CPU: a busy machine must not
        # turn a long walk into RuleTooCostly.
        got = next_occurrence(
            rrule=text, tz_name=tz_name, anchor=anchor, after=after, budget=step_budget(GENEROUS)
        )
        assert got == expected, (text, tz_name, anchor, after)
