"""Recurring schedules: RFC 5545 RRULE text evaluated in an IANA time zone.

Pure functions (stdlib + python-dateutil). A schedule is an RRULE line without DTSTART,
anchored at the notification's first ``fire_at`` and evaluated in ``tz_name``:

- DAILY or coarser rules run on local wall-clock time, so "every Monday 09:00
  Europe/Berlin" stays at 09:00 across DST changes. Wall times are localised with
  ``fold=0`` (PEP 495): a time inside a spring-forward gap moves forward by the gap
  (02:30 -> 03:30), a time that happens twice (fall back) fires once, at the first.
- HOURLY and MINUTELY rules follow real elapsed time: they run on the UTC timeline, so no
  real hour is skipped and no instant is produced twice. Their BY* filters (BYHOUR,
  BYDAY, ...) are therefore read in UTC.
- Finding an occurrence costs at most a CPU budget (``CpuBudget``, RECURRENCE_BUDGET_MS):
  a search that outruns it raises ``RuleTooCostly``. Running out is never read as the end
  of a schedule: only COUNT and UNTIL end one, and a rule with a next occurrence gets
  exactly dateutil's. ``admitted_first_occurrence`` is the check at create and PATCH.

Parsing and validation live in ``rules``; the names other modules use are
re-exported here. The walk on a rule's timeline lives in ``walk``, the
occurrences a late schedule skips in ``skipped``.
"""

from datetime import UTC, datetime, timedelta
from functools import partial

from delivery.recurrence.cost import CpuBudget, RuleTooCostly
from delivery.recurrence.rules import InvalidRecurrence, parse_rule, validate_rrule
from delivery.recurrence.walk import occurrence_after
from delivery.recurrence.zones import validate_timezone

__all__ = [
    "CpuBudget",
    "InvalidRecurrence",
    "RuleTooCostly",
    "admitted_first_occurrence",
    "first_occurrence",
    "next_occurrence",
    "validate_rrule",
    "validate_timezone",
]

# How many occurrences after the first the admission check finds, all within one budget.
ADMISSION_PROBES = 2
# Past every instant a schedule can have: a search after it walks a COUNT rule to its end.
_END_OF_TIME = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


def next_occurrence(
    *,
    rrule: str,
    tz_name: str,
    anchor: datetime,
    after: datetime,
    budget: CpuBudget | None = None,
) -> datetime | None:
    """First occurrence of the schedule strictly after `after`, as an aware UTC datetime,
    or None when the schedule has ended: COUNT or UNTIL reached, or nothing left before the
    calendar's end. `anchor` is the notification's first fire_at (aware; the DTSTART);
    occurrences at or before it are never returned. The caller passes after = max(occurrence
    just handled, now): "fire once now, then skip the rest".

    Cost does not grow with the schedule's age: the rule is re-anchored at an aligned
    period just before `after`. COUNT rules are the exception: they must count from the
    real anchor, so they are walked from it. Raises RuleTooCostly when the search outruns
    `budget` (default: DEFAULT_BUDGET_MS of this thread's CPU), InvalidRecurrence for an
    invalid rule or zone, ValueError for naive datetimes.
    """
    if anchor.tzinfo is None or after.tzinfo is None:
        raise ValueError("anchor and after must be timezone-aware")
    meter = (budget or CpuBudget()).meter()
    return occurrence_after(rrule, tz_name, anchor, threshold=max(after, anchor), meter=meter)


def first_occurrence(
    *, rrule: str, tz_name: str, anchor: datetime, budget: CpuBudget | None = None
) -> datetime | None:
    """The schedule's first occurrence: its first instance at or after `anchor` (the
    notification's fire_at), as an aware UTC datetime — `anchor` itself only when it
    matches the rule, as with dateutil's DTSTART. Parts the rule does not give (the time of
    day, the weekday of a plain WEEKLY rule…) come from `anchor`. None when the rule has no
    instance from `anchor` on (COUNT or UNTIL ends it first). Raises like next_occurrence.
    """
    if anchor.tzinfo is None:
        raise ValueError("anchor must be timezone-aware")
    meter = (budget or CpuBudget()).meter()
    return occurrence_after(rrule, tz_name, anchor, threshold=_just_before(anchor), meter=meter)


def _just_before(anchor: datetime) -> datetime:
    # dateutil drops DTSTART's microseconds, so the anchor's own instance is its whole second.
    return anchor.replace(microsecond=0) - timedelta(microseconds=1)


def admitted_first_occurrence(
    *, rrule: str, tz_name: str, anchor: datetime, now: datetime, budget: CpuBudget
) -> datetime | None:
    """first_occurrence, for a schedule about to be stored: raises RuleTooCostly unless the
    first occurrence and the next ADMISSION_PROBES after max(first, now) — or, for a COUNT
    rule, the walk through all its occurrences, the most any later search of it can cost —
    are all found within one `budget`. A create or PATCH so costs at most the budget, and
    each of the tick's searches, which has the whole budget to itself, has room for gaps
    between occurrences several times the ones probed (Friday the 13th is 1 to 14 months
    away)."""
    if anchor.tzinfo is None or now.tzinfo is None:
        raise ValueError("anchor and now must be timezone-aware")
    meter = budget.meter()
    search = partial(occurrence_after, rrule, tz_name, anchor, meter=meter)
    first = search(threshold=_just_before(anchor))
    if first is None:
        return None
    if "COUNT" in parse_rule(rrule).parts:
        probes = [_END_OF_TIME]
    else:
        probes = [max(first, now)] * ADMISSION_PROBES
    found = probes[0]
    for _ in probes:
        following = search(threshold=max(found, anchor))
        if following is None:
            break
        found = following
    return first
