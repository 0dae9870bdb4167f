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

Parsing and validation live in ``recurrence_rules``; the names other modules use are
re-exported here.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo

from dateutil.rrule import DAILY, HOURLY, MINUTELY, MONTHLY, WEEKLY, YEARLY, rrule, rrulestr

from notifications.recurrence_cost import CpuBudget, CpuMeter, RuleTooCostly
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
    "CpuBudget",
    "InvalidRecurrence",
    "RuleTooCostly",
    "Skipped",
    "admitted_first_occurrence",
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
# skipped_occurrences walks at most this many occurrences of a rule it cannot count
# arithmetically (and no more than the budget allows): the count is then "at least".
SKIP_COUNT_CAP = 2_000
# Parts that leave a sub-daily rule a plain "every N minutes/hours" from its anchor.
_FIXED_PERIOD_PARTS = frozenset({"FREQ", "INTERVAL", "WKST"})
# At create and PATCH a search may use this share of the budget: the tick's searches of an
# admitted rule then stay within the whole budget despite a machine's jitter and gaps between
# occurrences that vary (Friday the 13th is 1 to 14 months away).
ADMISSION_SHARE = 0.5
# How many occurrences after the first the admission check finds, each within its share.
ADMISSION_PROBES = 3
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
    return _occurrence_after(rrule, tz_name, anchor, threshold=max(after, anchor), meter=meter)


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
    # dateutil drops DTSTART's microseconds, so the anchor's own instance is its whole second.
    just_before = anchor.replace(microsecond=0) - timedelta(microseconds=1)
    meter = (budget or CpuBudget()).meter()
    return _occurrence_after(rrule, tz_name, anchor, threshold=just_before, meter=meter)


def admitted_first_occurrence(
    *, rrule: str, tz_name: str, anchor: datetime, now: datetime, budget: CpuBudget
) -> datetime | None:
    """first_occurrence, for a schedule about to be stored: raises RuleTooCostly unless the
    tick will find its occurrences within `budget`. Each search here gets ADMISSION_SHARE
    of it: the first occurrence, then the next ADMISSION_PROBES after max(first, now) — or,
    for a COUNT rule, the walk through all its occurrences, the most any later search of it
    can cost."""
    share = budget.share(ADMISSION_SHARE)
    first = first_occurrence(rrule=rrule, tz_name=tz_name, anchor=anchor, budget=share)
    if first is None:
        return None
    if "COUNT" in parse_rule(rrule).parts:
        probes = [_END_OF_TIME]
    else:
        probes = [max(first, now)] * ADMISSION_PROBES
    found: datetime | None = probes[0]
    for _ in probes:
        found = next_occurrence(
            rrule=rrule, tz_name=tz_name, anchor=anchor, after=found, budget=share
        )
        if found is None:
            break
    return first


def _occurrence_after(
    rrule: str, tz_name: str, anchor: datetime, *, threshold: datetime, meter: CpuMeter
) -> datetime | None:
    spec = parse_rule(rrule)
    frame = _Frame(zone(tz_name), sub_daily=spec.freq >= HOURLY)
    threshold = threshold.astimezone(UTC)
    try:
        walls = _walls(spec, frame, anchor, threshold, meter)
        return _first_after(walls, frame, threshold)
    except (ValueError, OverflowError) as exc:
        if isinstance(exc, RuleTooCostly):
            raise
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
    first = _occurrence_after(rrule, tz_name, anchor, threshold=max(after, anchor), meter=meter)
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
    first = _occurrence_after(rrule, tz_name, anchor, threshold=after, meter=meter)
    if first is None or first > now:
        return first, None
    upcoming = _occurrence_after(rrule, tz_name, anchor, threshold=max(now, anchor), meter=meter)
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
    frame = _Frame(zone(tz_name), sub_daily=spec.freq >= HOURLY)
    threshold = max(after, anchor).astimezone(UTC)
    # A wall time maps to an instant less than two days (the widest offset swing) away.
    end = frame.wall(through) + _OFFSET_MARGIN
    # A set: two wall times of one day can land on one instant across a DST gap.
    found: set[datetime] = {first}
    try:
        for wall in _walls(spec, frame, anchor, threshold, meter):
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


def _walls(
    spec: RuleSpec, frame: "_Frame", anchor: datetime, threshold: datetime, meter: CpuMeter
) -> Iterator[datetime]:
    """The rule's wall times from just before `threshold` on, each step of dateutil's walk
    charged to `meter`; nothing when the anchor's day exists in none of the rule's months.
    dateutil raises ValueError or OverflowError while iterating for a rule that selects
    nothing."""
    start = frame.wall(anchor)
    if not _day_exists(spec, start):
        return iter(())
    template = rrulestr(spec.core, dtstart=start)
    rule = template.replace(until=_until_in_frame(spec.until, frame), wkst=spec.wkst)
    if "COUNT" not in spec.parts:
        rule = _reanchored(rule, spec, start, frame.wall(threshold) - frame.margin)
    interval = _MeteredInterval(spec.interval)
    interval.meter = meter
    metered = rule.replace(interval=interval)
    meter.check()  # building a rule with long BY lists is work too
    return iter(metered)


class _MeteredInterval(int):
    """An INTERVAL that charges a CpuMeter at every step of dateutil's walk.

    dateutil hands back only matches and compares UNTIL only with matches, so a rule that
    never matches walks period by period to the year 9999 (seconds of CPU) with no way to
    stop it from outside. It does add INTERVAL at every step (WEEKLY: multiplies it by 7),
    so the step is where the walk can be stopped.
    """

    meter: CpuMeter

    def __radd__(self, other: int) -> int:
        self.meter.charge()
        return other + int(self)

    def __mul__(self, other: int) -> int:
        self.meter.charge()
        return int(self) * other


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
