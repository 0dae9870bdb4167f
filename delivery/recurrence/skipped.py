"""The occurrences a late recurring schedule jumps over when it fires once now and skips
the rest: how many, the first and the last, found with bounded work whatever the gap.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from dateutil.rrule import HOURLY, MINUTELY

from delivery.recurrence.cost import CpuBudget, CpuMeter
from delivery.recurrence.rules import parse_rule
from delivery.recurrence.walk import OFFSET_MARGIN, Frame, occurrence_after, wall_times
from delivery.recurrence.zones import zone

# skipped_occurrences walks at most this many occurrences of a rule it cannot count
# arithmetically (and no more than the budget allows): the count is then "at least".
SKIP_COUNT_CAP = 2_000
# Parts that leave a sub-daily rule a plain "every N minutes/hours" from its anchor.
_FIXED_PERIOD_PARTS = frozenset({"FREQ", "INTERVAL", "WKST"})


@dataclass(frozen=True)
class Skipped:
    """Occurrences a late schedule jumped over: how many, the first and the last."""

    count: int
    first: datetime
    last: datetime


def skipped_occurrences(
    *,
    rrule: str,
    tz_name: str,
    anchor: datetime,
    after: datetime,
    through: datetime,
    budget: CpuBudget | None = None,
) -> Skipped | None:
    """The occurrences in (`after`, `through`], or None when there are none. The caller
    passes the occurrence just handled and now: since the next occurrence is the first
    after now, these are exactly the ones "fire once now" skips.

    Bounded work whatever the gap: a rule that repeats every N minutes or hours with no
    BY*, COUNT or UNTIL part is counted arithmetically (exact); any other rule is walked,
    and past SKIP_COUNT_CAP occurrences, or once the budget is spent, the walk stops: the
    count is then "at least" and `last` the last one counted. Raises like next_occurrence
    when the first of them cannot be found within the budget.
    """
    meter = (budget or CpuBudget()).meter()
    first = occurrence_after(rrule, tz_name, anchor, threshold=max(after, anchor), meter=meter)
    if first is None or first > through:
        return None
    return _skipped_from(first, rrule, tz_name, anchor, (after, through), meter)


def next_and_skipped(
    *,
    rrule: str,
    tz_name: str,
    anchor: datetime,
    handled: datetime,
    now: datetime,
    budget: CpuBudget | None = None,
) -> tuple[datetime | None, Skipped | None]:
    """The next occurrence, the first after both `handled` (the occurrence just handled)
    and `now`, with what that skips: skipped_occurrences(after=handled, through=now).
    One search in the common case, when nothing was skipped. All of it shares one
    `budget`; counting the skipped ones uses what the searches left of it. Raises like
    next_occurrence."""
    if anchor.tzinfo is None or handled.tzinfo is None or now.tzinfo is None:
        raise ValueError("anchor, handled and now must be timezone-aware")
    meter = (budget or CpuBudget()).meter()
    after = max(handled, anchor)
    first = occurrence_after(rrule, tz_name, anchor, threshold=after, meter=meter)
    if first is None or first > now:
        return first, None
    upcoming = occurrence_after(rrule, tz_name, anchor, threshold=max(now, anchor), meter=meter)
    return upcoming, _skipped_from(first, rrule, tz_name, anchor, (handled, now), meter)


def _skipped_from(
    first: datetime,
    rrule: str,
    tz_name: str,
    anchor: datetime,
    span: tuple[datetime, datetime],
    meter: CpuMeter,
) -> Skipped:
    """The occurrences in `span` = (after, through], given `first`, the first of them."""
    after, through = span
    spec = parse_rule(rrule)
    if spec.freq in (HOURLY, MINUTELY) and spec.parts <= _FIXED_PERIOD_PARTS:
        # Sub-daily rules run on the UTC timeline, so every occurrence is first + k periods.
        period = (timedelta(hours=1) if spec.freq == HOURLY else timedelta(minutes=1)) * (
            spec.interval
        )
        count = (through - first) // period + 1
        return Skipped(count=count, first=first, last=first + (count - 1) * period)
    frame = Frame(zone(tz_name), sub_daily=spec.freq >= HOURLY)
    threshold = max(after, anchor).astimezone(UTC)
    # A wall time maps to an instant less than two days (the widest offset swing) away.
    end = frame.wall(through) + OFFSET_MARGIN
    # A set: two wall times of one day can land on one instant across a DST gap.
    found: set[datetime] = {first}
    try:
        for wall in wall_times(spec, frame, anchor, threshold, meter):
            if wall > end or len(found) >= SKIP_COUNT_CAP:
                break
            instant = frame.instant(wall)
            if threshold < instant <= through:
                found.add(instant)
    except (ValueError, OverflowError):
        # The budget is spent (the count so far is "at least") or the calendar's end is
        # reached (the occurrences found are all there are).
        pass
    return Skipped(count=len(found), first=min(found), last=max(found))
