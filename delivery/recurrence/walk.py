"""Walking a recurring schedule's rule with dateutil: on which timeline (local wall time,
or UTC for sub-daily rules), from where (re-anchored at an aligned period just before the
instant searched from, so the cost does not grow with the schedule's age), and charged to a
CPU meter at every step (``cost``). ``occurrence_after`` is the one search the
public functions of ``recurrence`` and ``skipped`` build on.
"""

from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import TypedDict

from dateutil.rrule import DAILY, HOURLY, MINUTELY, MONTHLY, WEEKLY, YEARLY, rrule, rrulestr

from delivery.recurrence.bounds import (
    DAY_PARTS,
    OCCURRENCE_COST,
    REJECTED_DAY_COST,
    month_days_exist,
)
from delivery.recurrence.cost import CpuMeter, RuleTooCostly
from delivery.recurrence.rules import RuleSpec, parse_rule
from delivery.recurrence.zones import zone

# A period start this far before `after` (in wall time) also covers candidates that a
# DST gap or a UTC-offset swing maps past `after`; offsets span less than 2 days.
OFFSET_MARGIN = timedelta(days=2)


def occurrence_after(
    rrule: str, tz_name: str, anchor: datetime, *, threshold: datetime, meter: CpuMeter
) -> datetime | None:
    """The schedule's first occurrence strictly after `threshold`, or None when it has
    ended; raises RuleTooCostly when `meter` runs out first."""
    spec = parse_rule(rrule)
    frame = Frame(zone(tz_name), sub_daily=spec.freq >= HOURLY)
    threshold = threshold.astimezone(UTC)
    try:
        walls = wall_times(spec, frame, anchor, threshold, meter)
        return _first_after(walls, frame, threshold)
    except (ValueError, OverflowError) as exc:
        if isinstance(exc, RuleTooCostly):
            raise
        # dateutil's way of saying the rule selects nothing from this anchor (for example
        # BYHOUR values an HOURLY interval never reaches), or the calendar's end (year 9999)
        # reached in local time: either way the schedule is over.
        return None


def wall_times(
    spec: RuleSpec, frame: "Frame", anchor: datetime, threshold: datetime, meter: CpuMeter
) -> Iterator[datetime]:
    """The rule's wall times from just before `threshold` on, each step of dateutil's walk
    charged to `meter`; nothing when the anchor's day exists in none of the rule's months.
    dateutil raises ValueError or OverflowError while iterating for a rule that selects
    nothing."""
    start = frame.wall(anchor)
    if not _day_exists(spec, start):
        return iter(())
    # Counted before dateutil expands anything: a first period over the allowance is
    # refused unexpanded, and every later period is charged as the walk steps into it.
    meter.admit_period(spec.period_cost, spec.period)
    template = rrulestr(spec.core, dtstart=start)
    # rrulestr makes a set only of several rules or of RDATE/EXDATE lines, never of a core.
    if not isinstance(template, rrule):
        raise TypeError(f"{spec.core!r} is not a single rule")
    rule = template.replace(until=_until_in_frame(spec.until, frame), wkst=spec.wkst)
    if "COUNT" not in spec.parts:
        rule = _reanchored(rule, spec, start, frame.wall(threshold) - frame.margin)
    interval = _MeteredInterval(spec.interval)
    interval.meter, interval.cost = meter, spec.step_cost
    metered = rule.replace(interval=interval)
    meter.check()  # building a rule with long BY lists is work too
    return _charged(iter(metered), meter)


def _charged(walls: Iterator[datetime], meter: CpuMeter) -> Iterator[datetime]:
    """`walls`, each occurrence charged as it is yielded."""
    for wall in walls:
        meter.charge(OCCURRENCE_COST)
        yield wall


class _MeteredInterval(int):
    """An INTERVAL that charges a CpuMeter at every step of dateutil's walk with what the
    period it steps into costs before it yields (``step_cost``).

    dateutil hands back only matches and compares UNTIL only with matches, so a rule that
    never matches walks period by period to the year 9999 (seconds of CPU) with no way to
    stop it from outside. It does add INTERVAL at every step (WEEKLY: multiplies it by 7),
    so the step is where the walk can be stopped. A sub-daily walk that lands on a day its
    day parts reject divides the rest of that day by INTERVAL to jump to its last period:
    that is where a rejected day, which costs several steps, is charged.
    """

    meter: CpuMeter
    cost: int

    def __radd__(self, other: int) -> int:
        self.meter.charge(self.cost)
        return other + int(self)

    def __mul__(self, other: int) -> int:
        self.meter.charge(self.cost)
        return int(self) * other

    def __rfloordiv__(self, other: int) -> int:
        self.meter.charge(REJECTED_DAY_COST)
        return other // int(self)


class Frame:
    """The timeline a rule is evaluated on: local wall time, or UTC for sub-daily rules."""

    def __init__(self, zone: tzinfo, *, sub_daily: bool) -> None:
        self.sub_daily = sub_daily
        self.zone = UTC if sub_daily else zone
        self.local_zone = zone
        self.margin = timedelta(0) if sub_daily else OFFSET_MARGIN

    def wall(self, instant: datetime) -> datetime:
        return instant.astimezone(self.zone).replace(tzinfo=None)

    def instant(self, wall: datetime) -> datetime:
        # fold=0: a gap time moves forward by the gap, a repeated time means the first.
        return wall.replace(tzinfo=self.zone, fold=0).astimezone(UTC)


def _first_after(walls: Iterator[datetime], frame: Frame, threshold: datetime) -> datetime | None:
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


class _AnchorDefaults(TypedDict, total=False):
    bymonth: int
    bymonthday: int
    byweekday: int
    byhour: int
    byminute: int
    bysecond: int


def _anchor_defaults(spec: RuleSpec, start: datetime) -> _AnchorDefaults:
    """What dateutil would fill in from DTSTART=`start` for the parts the rule omits."""
    given, freq = spec.parts, spec.freq
    defaults: _AnchorDefaults = {}
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


def _until_in_frame(until: tuple[datetime, str] | None, frame: Frame) -> datetime | None:
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
