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
- The search for the next occurrence is bounded (see ``SEARCH_STEPS``): a schedule with no
  occurrence within that horizon is treated as ended.

Parsing and validation live in ``recurrence_rules``; the names other modules use are
re-exported here.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo

from dateutil.rrule import DAILY, HOURLY, MINUTELY, MONTHLY, WEEKLY, YEARLY, rrule, rrulestr

from notifications.recurrence_rules import (
    DAY_PARTS,
    InvalidRecurrence,
    RuleSpec,
    month_days_exist,
    parse_rule,
    validate_rrule,
    validate_timezone,
    zone,
)

__all__ = [
    "InvalidRecurrence",
    "Skipped",
    "first_occurrence",
    "next_and_skipped",
    "next_occurrence",
    "skipped_occurrences",
    "validate_rrule",
    "validate_timezone",
]

# A period start this far before `after` (in wall time) also covers candidates that a
# DST gap or a UTC-offset swing maps past `after`; offsets span less than 2 days.
_OFFSET_MARGIN = timedelta(days=2)
# How many steps dateutil may take without producing a candidate before the search gives
# up and the schedule counts as ended. A step is one period; HOURLY and MINUTELY rules also
# count every hour or minute tried (a day no BY part allows is one step, but BYHOUR makes
# dateutil try the hours in between). 400 years are a whole Gregorian cycle, so YEARLY
# rules lose nothing; the rest still reach "every 29 February" (8 years apart across 2100)
# unless a sub-daily rule also narrows the hours. Each budget costs at most ~30 ms of CPU;
# a DAILY/HOURLY INTERVAL of years adds dateutil's month-by-month roll over the calendar,
# which ends at the year 9999 anyway (~50 ms at most).
# skipped_occurrences walks at most this many occurrences of a rule it cannot count
# arithmetically: about 70 ms of CPU for a MINUTELY rule narrowed by BYHOUR, which is
# more than a week of its occurrences.
SKIP_COUNT_CAP = 2_000
# Parts that leave a sub-daily rule a plain "every N minutes/hours" from its anchor.
_FIXED_PERIOD_PARTS = frozenset({"FREQ", "INTERVAL", "WKST"})
SEARCH_STEPS = {
    YEARLY: 400,
    MONTHLY: 1_200,
    WEEKLY: 2_500,
    DAILY: 4_000,
    HOURLY: 6_000,
    MINUTELY: 3_200,
}


def next_occurrence(
    *, rrule: str, tz_name: str, anchor: datetime, after: datetime
) -> datetime | None:
    """First occurrence of the schedule strictly after `after`, as an aware UTC datetime,
    or None when the schedule has ended: COUNT/UNTIL reached, the rule produces nothing for
    this anchor, or nothing within the search horizon (SEARCH_STEPS periods without a
    candidate; such a schedule is treated as ended). `anchor` is the notification's first
    fire_at (aware; the DTSTART); occurrences at or before it are never returned. The
    caller passes after = max(occurrence just handled, now): "fire once now, then skip
    the rest".

    Cost does not grow with the schedule's age: the rule is re-anchored at an aligned
    period just before `after`. COUNT rules are the exception: they must count from the
    real anchor, so they are walked from it (bounded by MAX_COUNT occurrences).
    Raises InvalidRecurrence for an invalid rule or zone, ValueError for naive datetimes.
    """
    if anchor.tzinfo is None or after.tzinfo is None:
        raise ValueError("anchor and after must be timezone-aware")
    return _occurrence_after(rrule, tz_name, anchor, threshold=max(after, anchor))


def first_occurrence(*, rrule: str, tz_name: str, anchor: datetime) -> datetime | None:
    """The schedule's first occurrence: its first instance at or after `anchor` (the
    notification's fire_at), as an aware UTC datetime — `anchor` itself only when it
    matches the rule, as with dateutil's DTSTART. Parts the rule does not give (the time of
    day, the weekday of a plain WEEKLY rule…) come from `anchor`. None when the rule has no
    instance from `anchor` on (COUNT or UNTIL ends it first, or nothing within the search
    horizon). Raises InvalidRecurrence for an invalid rule or zone, ValueError for a naive
    `anchor`.
    """
    if anchor.tzinfo is None:
        raise ValueError("anchor must be timezone-aware")
    # dateutil drops DTSTART's microseconds, so the anchor's own instance is its whole second.
    just_before = anchor.replace(microsecond=0) - timedelta(microseconds=1)
    return _occurrence_after(rrule, tz_name, anchor, threshold=just_before)


def _occurrence_after(
    rrule: str, tz_name: str, anchor: datetime, *, threshold: datetime
) -> datetime | None:
    spec = parse_rule(rrule)
    frame = _Frame(zone(tz_name), sub_daily=spec.freq >= HOURLY)
    threshold = threshold.astimezone(UTC)
    try:
        return _first_after(_walls(spec, frame, anchor, threshold), frame, threshold)
    except (ValueError, OverflowError):
        # dateutil's way of saying the rule selects nothing from this anchor (for example
        # BYHOUR values an HOURLY interval never reaches), or the calendar's end (year 9999)
        # reached in local time: either way the schedule is over.
        return None


@dataclass(frozen=True)
class Skipped:
    """Occurrences a late schedule jumped over: how many, the first and the last."""

    count: int
    first: datetime
    last: datetime


def skipped_occurrences(
    *, rrule: str, tz_name: str, anchor: datetime, after: datetime, through: datetime
) -> Skipped | None:
    """The occurrences in (`after`, `through`], or None when there are none. The caller
    passes the occurrence just handled and now: since the next occurrence is the first
    after now, these are exactly the ones "fire once now" skips.

    Bounded work whatever the gap: a rule that repeats every N minutes or hours with no
    BY*, COUNT or UNTIL part is counted arithmetically (exact); any other rule is walked,
    and past SKIP_COUNT_CAP occurrences the walk stops: the count is then the cap (read it
    as "at least") and `last` the last one counted. Raises like next_occurrence.
    """
    first = next_occurrence(rrule=rrule, tz_name=tz_name, anchor=anchor, after=after)
    if first is None or first > through:
        return None
    return _skipped_from(
        first, rrule=rrule, tz_name=tz_name, anchor=anchor, after=after, through=through
    )


def next_and_skipped(
    *, rrule: str, tz_name: str, anchor: datetime, handled: datetime, now: datetime
) -> tuple[datetime | None, Skipped | None]:
    """The next occurrence, the first after both `handled` (the occurrence just handled)
    and `now`, with what that skips: skipped_occurrences(after=handled, through=now).
    One search in the common case, when nothing was skipped. Raises like next_occurrence."""
    first = next_occurrence(rrule=rrule, tz_name=tz_name, anchor=anchor, after=handled)
    if first is None or first > now:
        return first, None
    skipped = _skipped_from(
        first, rrule=rrule, tz_name=tz_name, anchor=anchor, after=handled, through=now
    )
    return next_occurrence(rrule=rrule, tz_name=tz_name, anchor=anchor, after=now), skipped


def _skipped_from(
    first: datetime,
    *,
    rrule: str,
    tz_name: str,
    anchor: datetime,
    after: datetime,
    through: datetime,
) -> Skipped:
    """skipped_occurrences, given `first`, the first occurrence after `after` (<= through)."""
    spec = parse_rule(rrule)
    if spec.freq in (HOURLY, MINUTELY) and spec.parts <= _FIXED_PERIOD_PARTS:
        # Sub-daily rules run on the UTC timeline, so every occurrence is first + k periods.
        period = (timedelta(hours=1) if spec.freq == HOURLY else timedelta(minutes=1)) * (
            spec.interval
        )
        count = (through - first) // period + 1
        return Skipped(count=count, first=first, last=first + (count - 1) * period)
    spec, frame, threshold = _setup(rrule, tz_name, anchor, after)
    # A wall time maps to an instant less than two days (the widest offset swing) away.
    end = frame.wall(through) + _OFFSET_MARGIN
    # A set: two wall times of one day can land on one instant across a DST gap.
    found: set[datetime] = set()
    try:
        for wall in _walls(spec, frame, anchor, threshold):
            if wall > end or len(found) >= SKIP_COUNT_CAP:
                break
            instant = frame.instant(wall)
            if threshold < instant <= through:
                found.add(instant)
    except (ValueError, OverflowError):
        pass  # the calendar's end: the occurrences found so far are all there are
    return Skipped(count=len(found), first=min(found), last=max(found))


def _setup(
    rrule: str, tz_name: str, anchor: datetime, after: datetime
) -> tuple[RuleSpec, "_Frame", datetime]:
    if anchor.tzinfo is None or after.tzinfo is None:
        raise ValueError("anchor and after must be timezone-aware")
    spec = parse_rule(rrule)
    frame = _Frame(zone(tz_name), sub_daily=spec.freq >= HOURLY)
    return spec, frame, max(after, anchor).astimezone(UTC)


def _walls(
    spec: RuleSpec, frame: "_Frame", anchor: datetime, threshold: datetime
) -> Iterator[datetime]:
    """The rule's wall times from just before `threshold` on, bounded (SEARCH_STEPS);
    nothing when the anchor's day exists in none of the rule's months. dateutil raises
    ValueError or OverflowError while iterating for a rule that selects nothing."""
    start = frame.wall(anchor)
    if not _day_exists(spec, start):
        return iter(())
    template = rrulestr(spec.core, dtstart=start)
    rule = template.replace(until=_until_in_frame(spec.until, frame), wkst=spec.wkst)
    if "COUNT" not in spec.parts:
        rule = _reanchored(rule, spec, start, frame.wall(threshold) - frame.margin)
    return _bounded_walk(rule, spec)


class _SearchExhausted(Exception):
    pass


class _CountedInterval(int):
    """An INTERVAL that counts dateutil's steps and ends the walk when they run out.

    dateutil hands back only matches and compares UNTIL only with matches, so a rule that
    never matches walks period by period to the year 9999 (seconds of CPU) with no way to
    stop it from outside. It does add INTERVAL at every step (WEEKLY: multiplies it by 7),
    so the step is where the walk can be stopped.
    """

    steps_left: int

    def __radd__(self, other: int) -> int:
        self._step()
        return other + int(self)

    def __mul__(self, other: int) -> int:
        self._step()
        return int(self) * other

    def _step(self) -> None:
        self.steps_left -= 1
        if self.steps_left < 0:
            raise _SearchExhausted


def _bounded_walk(rule: rrule, spec: RuleSpec) -> Iterator[datetime]:
    """The occurrences of `rule`, ending early once SEARCH_STEPS steps pass without one."""
    budget = SEARCH_STEPS[spec.freq]
    interval = _CountedInterval(spec.interval)
    interval.steps_left = budget
    walk = iter(rule.replace(interval=interval))
    while True:
        try:
            wall = next(walk)
        except (StopIteration, _SearchExhausted):
            return
        interval.steps_left = budget
        yield wall


class _Frame:
    """The timeline a rule is evaluated on: local wall time, or UTC for sub-daily rules."""

    def __init__(self, zone: tzinfo, *, sub_daily: bool) -> None:
        self.sub_daily = sub_daily
        self.zone = UTC if sub_daily else zone
        self.local_zone = zone
        self.margin = timedelta(0) if sub_daily else _OFFSET_MARGIN

    def wall(self, instant: datetime) -> datetime:
        return instant.astimezone(self.zone).replace(tzinfo=None)

    def instant(self, wall: datetime) -> datetime:
        # fold=0: a gap time moves forward by the gap, a repeated time means the first.
        return wall.replace(tzinfo=self.zone, fold=0).astimezone(UTC)


def _first_after(walls: Iterator[datetime], frame: _Frame, threshold: datetime) -> datetime | None:
    """Earliest instant of the wall times `walls` after `threshold`.

    Wall order equals instant order except inside a DST gap: a gap time moves forward, so
    a later wall time (up to where the moved one lands) may come earlier. Scan that far.
    """
    best: datetime | None = None
    stop_wall: datetime | None = None
    for wall in walls:
        if stop_wall is not None and wall >= stop_wall:
            break
        instant = frame.instant(wall)
        if instant <= threshold:
            continue
        if best is None or instant < best:
            best = instant
        if stop_wall is None:
            stop_wall = frame.wall(instant)
            if stop_wall <= wall:
                break
    return best


def _reanchored(rule: rrule, spec: RuleSpec, start: datetime, target: datetime) -> rrule:
    """`rule` restarted at the aligned period containing `target`, same occurrences from
    there on: the defaults dateutil derives from DTSTART are pinned to the real anchor."""
    period = _aligned_period_start(spec, start, target)
    if period is None:
        return rule
    return rule.replace(dtstart=period, **_anchor_defaults(spec, start))


def _aligned_period_start(spec: RuleSpec, start: datetime, target: datetime) -> datetime | None:
    """Start of the last period at or before `target` that is a whole number of INTERVALs
    after the anchor's period; None when that is the anchor's own period (or earlier)."""
    freq, step = spec.freq, spec.interval
    if freq == YEARLY:
        k = (target.year - start.year) // step
        return datetime(start.year + k * step, 1, 1) if k > 0 else None
    if freq == MONTHLY:
        months = lambda d: d.year * 12 + d.month - 1  # noqa: E731
        k = (months(target) - months(start)) // step
        index = months(start) + k * step
        return datetime(index // 12, index % 12 + 1, 1) if k > 0 else None
    if freq in (WEEKLY, DAILY):
        days_per_period = 7 if freq == WEEKLY else 1
        first = _period_day(start.date(), freq, spec.wkst)
        days = (_period_day(target.date(), freq, spec.wkst) - first).days
        k = days // (days_per_period * step)
        day = first + timedelta(days=k * days_per_period * step)
        return datetime.combine(day, time()) if k > 0 else None
    unit = timedelta(hours=1) if freq == HOURLY else timedelta(minutes=1)
    first = start.replace(minute=0 if freq == HOURLY else start.minute, second=0, microsecond=0)
    k = (target - first) // (unit * step)
    return first + k * step * unit if k > 0 else None


def _period_day(day: date, freq: int, wkst: int) -> date:
    if freq == WEEKLY:
        return day - timedelta(days=(day.weekday() - wkst) % 7)
    return day


def _anchor_defaults(spec: RuleSpec, start: datetime) -> dict[str, int]:
    """What dateutil would fill in from DTSTART=`start` for the parts the rule omits."""
    given, freq = spec.parts, spec.freq
    defaults: dict[str, int] = {}
    if not given & DAY_PARTS:
        if freq == YEARLY:
            if "BYMONTH" not in given:
                defaults["bymonth"] = start.month
            defaults["bymonthday"] = start.day
        elif freq == MONTHLY:
            defaults["bymonthday"] = start.day
        elif freq == WEEKLY:
            defaults["byweekday"] = start.weekday()
    if freq <= DAILY and "BYHOUR" not in given:
        defaults["byhour"] = start.hour
    if freq < MINUTELY and "BYMINUTE" not in given:
        defaults["byminute"] = start.minute
    if "BYSECOND" not in given:
        defaults["bysecond"] = start.second
    return defaults


def _until_in_frame(until: tuple[datetime, str] | None, frame: _Frame) -> datetime | None:
    """UNTIL as a naive value on the rule's timeline (dateutil refuses to mix naive and
    aware values, so the conversion happens here)."""
    if until is None:
        return None
    value, form = until
    if form == "utc":
        return frame.wall(value.replace(tzinfo=UTC))
    local = value.replace(tzinfo=frame.local_zone, fold=0)
    return frame.wall(local) if frame.sub_daily else value


def _day_exists(spec: RuleSpec, start: datetime) -> bool:
    """False when the anchor's day of month, which MONTHLY and YEARLY rules without day
    parts inherit, exists in none of the BYMONTH months: dateutil would search to year 9999."""
    inherits_day = spec.freq in (MONTHLY, YEARLY) and not spec.parts & DAY_PARTS
    return not inherits_day or month_days_exist(spec.months, (start.day,))
