"""Differential tests against dateutil: over thousands of generated rules and anchors, a
rule with a next occurrence gets exactly dateutil's, and a schedule ends only when dateutil
finds no next occurrence. Running out of budget is the only other answer (RuleTooCostly),
never a different time and never "ended".

The reference is dateutil's own walk from the anchor, in the zone semantics the product
documents (§4): DAILY and coarser rules on local wall time, localised with fold=0 (a time in
a spring-forward gap moves forward, a repeated one is the first); HOURLY and MINUTELY on the
UTC timeline; a rule naming BYHOUR or BYMINUTE without BYSECOND fires at second 0."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from dateutil.rrule import rrulestr
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from delivery.recurrence import (
    InvalidRecurrence,
    RuleTooCostly,
    first_occurrence,
    next_occurrence,
    validate_rrule,
)
from tests.delivery.recurrence_support import step_budget

ZONES = [
    "UTC",
    "Europe/Berlin",
    "Europe/London",
    "America/New_York",
    "America/St_Johns",
    "Australia/Sydney",
    "Pacific/Chatham",
    "Asia/Kolkata",
]
SUB_DAILY = ("HOURLY", "MINUTELY")
DAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]
# Enough for every rule that matches within years; a rule that never matches runs out.
STEPS = 4_000
EXAMPLES = settings(
    max_examples=600,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)


def _subset(items, most=3):
    return st.lists(st.sampled_from(items), min_size=1, max_size=most, unique=True).map(
        lambda chosen: ",".join(map(str, sorted(chosen, key=items.index)))
    )


@st.composite
def rules(draw):
    freq = draw(st.sampled_from(["YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY"]))
    parts = {"FREQ": freq, "INTERVAL": str(draw(st.sampled_from([1, 1, 2, 3, 5, 7, 11, 25])))}
    numbered = freq in ("MONTHLY", "YEARLY")
    optional = {
        "BYMONTH": _subset(list(range(1, 13))),
        "BYDAY": _subset(DAYS + (["1MO", "-1FR", "2TU"] if numbered else [])),
        "BYHOUR": _subset([0, 1, 2, 3, 9, 17, 23]),
        "BYMINUTE": _subset([0, 7, 30, 45, 59]),
        "BYSECOND": _subset([0, 15, 30]),
    }
    if freq != "WEEKLY":
        optional["BYMONTHDAY"] = _subset([1, 13, 15, 28, 29, 31, -1])
    if freq in ("YEARLY", "HOURLY", "MINUTELY"):
        optional["BYYEARDAY"] = _subset([1, 60, 100, 200, 366, -1])
    if freq == "YEARLY":
        optional["BYWEEKNO"] = _subset([1, 10, 20, 52, 53, -1])
    for name in draw(st.lists(st.sampled_from(sorted(optional)), max_size=3, unique=True)):
        parts[name] = draw(optional[name])
    if len(parts) > 2 and draw(st.booleans()):
        parts["BYSETPOS"] = str(draw(st.sampled_from([1, 2, -1])))
    ending = draw(st.sampled_from(["", "", "COUNT", "UNTIL", "LOCAL_UNTIL"]))
    if ending == "COUNT":
        parts["COUNT"] = str(draw(st.integers(1, 60)))
    elif ending:
        until = draw(st.datetimes(datetime(2024, 1, 1), datetime(2029, 12, 31)))
        parts["UNTIL"] = until.strftime("%Y%m%dT%H%M%S") + ("Z" if ending == "UNTIL" else "")
    if draw(st.booleans()):
        parts["WKST"] = draw(st.sampled_from(DAYS))
    return ";".join(f"{key}={value}" for key, value in parts.items())


anchors = st.datetimes(datetime(2024, 1, 1), datetime(2028, 12, 31)).map(
    lambda moment: moment.replace(microsecond=0, tzinfo=UTC)
)
# Near the small hours half the time, where DST changes happen.
anchors = anchors | anchors.map(lambda moment: moment.replace(hour=moment.hour % 4))
# How far past the anchor `after` may lie: the reference walks every occurrence from the
# anchor, so the finer the rule, the nearer.
HORIZON_DAYS = {"MINUTELY": 2, "HOURLY": 40, "DAILY": 400}


@st.composite
def searches(draw):
    text = draw(rules())
    horizon = HORIZON_DAYS.get(text.split(";")[0].removeprefix("FREQ="), 900)
    gap = draw(st.timedeltas(timedelta(days=-1), timedelta(days=horizon)))
    return text, gap


def reference(text, tz_name, anchor, threshold):
    """The first instant after `threshold` of dateutil's walk from `anchor`, or None."""
    parts = dict(item.split("=") for item in text.split(";"))
    sub_daily = parts["FREQ"] in SUB_DAILY
    frame = UTC if sub_daily else ZoneInfo(tz_name)
    if parts.keys() & {"BYHOUR", "BYMINUTE"} and "BYSECOND" not in parts:
        parts["BYSECOND"] = "0"
    until = parts.pop("UNTIL", None)
    start = anchor.astimezone(frame).replace(tzinfo=None)
    try:
        rule = rrulestr(";".join(f"{k}={v}" for k, v in parts.items()), dtstart=start)
        if until is not None:
            rule = rule.replace(until=_until_wall(until, frame, ZoneInfo(tz_name)))
        best = None
        for wall in rule:
            # A wall time is within a day of its instant: nothing later can come earlier.
            if best is not None and wall.replace(tzinfo=UTC) - timedelta(days=1) > best:
                break
            instant = wall.replace(tzinfo=frame, fold=0).astimezone(UTC)
            if instant > threshold and (best is None or instant < best):
                best = instant
    except ValueError:
        return None  # dateutil: nothing from this anchor, or the calendar's end
    return best


def _until_wall(until, frame, local):
    moment = datetime.strptime(until.rstrip("Z"), "%Y%m%dT%H%M%S")
    if until.endswith("Z"):
        return moment.replace(tzinfo=UTC).astimezone(frame).replace(tzinfo=None)
    if frame is UTC:  # a local UNTIL of a sub-daily rule, read in its zone
        return moment.replace(tzinfo=local, fold=0).astimezone(UTC).replace(tzinfo=None)
    return moment


def _ours(search, **arguments):
    try:
        validate_rrule(arguments["rrule"])
    except InvalidRecurrence:
        reject()
    try:
        return search(**arguments, budget=step_budget(STEPS))
    except RuleTooCostly:
        reject()


@EXAMPLES
@given(searches(), st.sampled_from(ZONES), anchors)
def test_next_occurrence_is_dateutils_and_ends_only_when_dateutil_does(search, zone, anchor):
    text, gap = search
    after = anchor + gap
    found = _ours(next_occurrence, rrule=text, tz_name=zone, anchor=anchor, after=after)

    assert found == reference(text, zone, anchor, max(after, anchor))


@EXAMPLES
@given(rules(), st.sampled_from(ZONES), anchors)
def test_first_occurrence_is_dateutils_first_instance_from_the_anchor(text, zone, anchor):
    found = _ours(first_occurrence, rrule=text, tz_name=zone, anchor=anchor)

    assert found == reference(text, zone, anchor, anchor - timedelta(microseconds=1))
