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
"""

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil.rrule import DAILY, HOURLY, MINUTELY, MONTHLY, WEEKLY, YEARLY, rrule, rrulestr

MAX_COUNT = 10_000  # COUNT rules are walked from their anchor: this bounds the walk.
MAX_INTERVAL = 10_000
_FREQUENCIES = {
    "YEARLY": YEARLY,
    "MONTHLY": MONTHLY,
    "WEEKLY": WEEKLY,
    "DAILY": DAILY,
    "HOURLY": HOURLY,
    "MINUTELY": MINUTELY,
}
_WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
# Allowed (low, high) magnitude of every integer-list part; 0 is only valid where low is 0.
_INT_LISTS = {
    "BYSECOND": (0, 59, False),
    "BYMINUTE": (0, 59, False),
    "BYHOUR": (0, 23, False),
    "BYMONTH": (1, 12, False),
    "BYMONTHDAY": (1, 31, True),
    "BYYEARDAY": (1, 366, True),
    "BYWEEKNO": (1, 53, True),
    "BYSETPOS": (1, 366, True),
}
_KNOWN_PARTS = {"FREQ", "INTERVAL", "COUNT", "UNTIL", "WKST", "BYDAY", *_INT_LISTS}
_DAY_PARTS = frozenset({"BYWEEKNO", "BYYEARDAY", "BYMONTHDAY", "BYDAY"})
_BYDAY_ITEM = re.compile(r"([+-]?\d{1,2})?(MO|TU|WE|TH|FR|SA|SU)")
_UNTIL_FORMS = re.compile(r"(\d{8})(?:T(\d{6})(Z?))?")
# A period start this far before `after` (in wall time) also covers candidates that a
# DST gap or a UTC-offset swing maps past `after`; offsets span less than 2 days.
_OFFSET_MARGIN = timedelta(days=2)
_LONGEST_MONTH = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


class InvalidRecurrence(ValueError):
    """str(exc) is a clear, client-safe message."""


@dataclass(frozen=True)
class _Spec:
    core: str  # the RRULE without UNTIL, for dateutil
    freq: int
    interval: int
    wkst: int
    parts: frozenset[str]
    months: tuple[int, ...]  # BYMONTH, or all twelve
    until: tuple[datetime, str] | None  # (naive value, "utc" | "local" | "date")


def validate_timezone(name: str) -> None:
    """Raise InvalidRecurrence("unknown time zone 'X'") unless `name` is an IANA zone."""
    _zone(name)


def validate_rrule(text: str) -> None:
    """Raise InvalidRecurrence with a clear message unless `text` is a usable RRULE line.

    Accepted: one RFC 5545 RRULE (optionally prefixed ``RRULE:``) with FREQ from YEARLY
    to MINUTELY, no DTSTART/RDATE/EXDATE/EXRULE, COUNT 1..MAX_COUNT or UNTIL (not both).
    UNTIL may be UTC (``20270101T000000Z``), local wall time (``20270101T000000``) or a
    date (``20270101``: through the end of that local day).
    """
    _parse(text)


def next_occurrence(
    *, rrule: str, tz_name: str, anchor: datetime, after: datetime
) -> datetime | None:
    """First occurrence of the schedule strictly after `after`, as an aware UTC datetime,
    or None when the schedule has ended (COUNT/UNTIL, or a rule that can produce nothing
    for this anchor). `anchor` is the notification's first fire_at (aware; the DTSTART);
    occurrences at or before it are never returned. The caller passes
    after = max(occurrence just handled, now): "fire once now, then skip the rest".

    Cost does not grow with the schedule's age: the rule is re-anchored at an aligned
    period just before `after`. COUNT rules are the exception: they must count from the
    real anchor, so they are walked from it (bounded by MAX_COUNT occurrences).
    Raises InvalidRecurrence for an invalid rule or zone, ValueError for naive datetimes.
    """
    if anchor.tzinfo is None or after.tzinfo is None:
        raise ValueError("anchor and after must be timezone-aware")
    spec = _parse(rrule)
    frame = _Frame(_zone(tz_name), sub_daily=spec.freq >= HOURLY)
    start = frame.wall(anchor)
    threshold = max(after, anchor).astimezone(UTC)
    if not _day_exists(spec, start):
        return None
    try:
        template = rrulestr(spec.core, dtstart=start)
        rule = template.replace(until=_until_in_frame(spec.until, frame), wkst=spec.wkst)
        if "COUNT" not in spec.parts:
            rule = _reanchored(rule, spec, start, frame.wall(threshold) - frame.margin)
        return _first_after(rule, frame, threshold)
    except ValueError:
        # dateutil's way of saying the rule selects nothing from this anchor (for example
        # BYHOUR values an HOURLY interval never reaches): the schedule is over.
        return None


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


def _first_after(rule: rrule, frame: _Frame, threshold: datetime) -> datetime | None:
    """Earliest instant of `rule` after `threshold`.

    Wall order equals instant order except inside a DST gap: a gap time moves forward, so
    a later wall time (up to where the moved one lands) may come earlier. Scan that far.
    """
    best: datetime | None = None
    stop_wall: datetime | None = None
    for wall in rule:
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


def _reanchored(rule: rrule, spec: _Spec, start: datetime, target: datetime) -> rrule:
    """`rule` restarted at the aligned period containing `target`, same occurrences from
    there on: the defaults dateutil derives from DTSTART are pinned to the real anchor."""
    period = _aligned_period_start(spec, start, target)
    if period is None:
        return rule
    return rule.replace(dtstart=period, **_anchor_defaults(spec, start))


def _aligned_period_start(spec: _Spec, start: datetime, target: datetime) -> datetime | None:
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


def _anchor_defaults(spec: _Spec, start: datetime) -> dict[str, int]:
    """What dateutil would fill in from DTSTART=`start` for the parts the rule omits."""
    given, freq = spec.parts, spec.freq
    defaults: dict[str, int] = {}
    if not given & _DAY_PARTS:
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


def _day_exists(spec: _Spec, start: datetime) -> bool:
    """False when the anchor's day of month, which MONTHLY and YEARLY rules without day
    parts inherit, exists in none of the BYMONTH months: dateutil would search to year 9999."""
    inherits_day = spec.freq in (MONTHLY, YEARLY) and not spec.parts & _DAY_PARTS
    return not inherits_day or _month_days_exist(spec.months, (start.day,))


def _month_days_exist(months: tuple[int, ...], month_days: tuple[int, ...]) -> bool:
    return any(abs(day) <= _LONGEST_MONTH[month] for month in months for day in month_days)


def _int_list(value: str) -> tuple[int, ...]:
    return tuple(int(item) for item in value.split(","))


def _zone(name: str) -> ZoneInfo:
    shown = name[:64] if isinstance(name, str) else str(type(name).__name__)
    if not isinstance(name, str) or not name or name != name.strip():
        raise InvalidRecurrence(f"unknown time zone '{shown}'")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidRecurrence(f"unknown time zone '{shown}'") from None


@lru_cache(maxsize=1024)
def _parse(text: str) -> _Spec:
    """Check `text` and split it into what dateutil parses and what is handled here."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidRecurrence("rrule must be a non-empty RRULE line such as 'FREQ=DAILY'")
    line = text.strip()
    if "\n" in line or "\r" in line:
        raise InvalidRecurrence(
            "rrule must be a single RRULE line; DTSTART, RDATE, EXDATE and EXRULE are not "
            "supported (the first occurrence is fire_at)"
        )
    name, colon, rest = line.partition(":")
    if colon:
        if name.strip().upper() != "RRULE":
            raise InvalidRecurrence(
                f"unsupported property '{name.strip()[:20]}': rrule takes only the RRULE "
                "value (no DTSTART, RDATE, EXDATE or EXRULE; the first occurrence is fire_at)"
            )
        line = rest.strip()
    parts = _split_parts(line)
    _check_parts(parts)
    core = ";".join(f"{key}={value}" for key, value in parts.items() if key != "UNTIL")
    _check_with_dateutil(core, parts)
    return _Spec(
        core=core,
        freq=_FREQUENCIES[parts["FREQ"]],
        interval=int(parts.get("INTERVAL", "1")),
        wkst=_WEEKDAYS.index(parts.get("WKST", "MO")),
        parts=frozenset(parts),
        months=_int_list(parts.get("BYMONTH", "1,2,3,4,5,6,7,8,9,10,11,12")),
        until=_parse_until(parts["UNTIL"]) if "UNTIL" in parts else None,
    )


def _split_parts(line: str) -> dict[str, str]:
    parts: dict[str, str] = {}
    for item in line.split(";"):
        key, equals, value = item.partition("=")
        key, value = key.strip().upper(), value.strip().upper()
        if not equals or not key or not value:
            raise InvalidRecurrence(f"rrule part '{item[:40]}' must look like NAME=VALUE")
        if key not in _KNOWN_PARTS:
            raise InvalidRecurrence(f"unknown rrule part '{key[:20]}'")
        if key in parts:
            raise InvalidRecurrence(f"rrule part {key} is given twice")
        parts[key] = value
    return parts


def _check_parts(parts: dict[str, str]) -> None:
    freq = parts.get("FREQ")
    if freq == "SECONDLY":
        raise InvalidRecurrence("FREQ=SECONDLY is not supported: the scheduler runs once a minute")
    if freq not in _FREQUENCIES:
        raise InvalidRecurrence(
            "rrule needs FREQ set to one of YEARLY, MONTHLY, WEEKLY, DAILY, HOURLY, MINUTELY"
        )
    if "COUNT" in parts and "UNTIL" in parts:
        raise InvalidRecurrence("rrule may have COUNT or UNTIL, not both")
    _check_int(parts, "INTERVAL", 1, MAX_INTERVAL)
    _check_int(parts, "COUNT", 1, MAX_COUNT)
    if parts.get("WKST", "MO") not in _WEEKDAYS:
        raise InvalidRecurrence("WKST must be one of MO, TU, WE, TH, FR, SA, SU")
    for key, (low, high, signed) in _INT_LISTS.items():
        if key in parts:
            _check_int_list(key, parts[key], low, high, signed)
    if "BYDAY" in parts:
        _check_byday(parts["BYDAY"], numbered_ok=freq in ("MONTHLY", "YEARLY"))
    _check_rfc_combinations(parts, freq)
    if "BYMONTHDAY" in parts and not _month_days_exist(
        _int_list(parts.get("BYMONTH", "1,2,3,4,5,6,7,8,9,10,11,12")),
        _int_list(parts["BYMONTHDAY"]),
    ):
        raise InvalidRecurrence("BYMONTHDAY never falls in the BYMONTH months (like February 30)")


def _check_int(parts: dict[str, str], key: str, low: int, high: int) -> None:
    value = parts.get(key)
    if value is not None and not (value.isdigit() and low <= int(value) <= high):
        raise InvalidRecurrence(f"{key} must be a whole number from {low} to {high}")


def _check_int_list(key: str, value: str, low: int, high: int, signed: bool) -> None:
    allowed = f"-{high}..-{low} or {low}..{high}" if signed else f"{low}..{high}"
    for item in value.split(","):
        digits = item[1:] if signed and item[:1] in "+-" and len(item) > 1 else item
        if not (digits.isdigit() and low <= int(digits) <= high):
            raise InvalidRecurrence(f"{key} must be a comma-separated list of {allowed}")


def _check_byday(value: str, *, numbered_ok: bool) -> None:
    for item in value.split(","):
        match = _BYDAY_ITEM.fullmatch(item)
        if match is None or (match[1] and not 1 <= abs(int(match[1])) <= 53):
            raise InvalidRecurrence(
                "BYDAY must be a comma-separated list of MO, TU, WE, TH, FR, SA, SU, "
                "optionally numbered from -53 to 53 (e.g. 1MO, -1FR)"
            )
        if match[1] and not numbered_ok:
            raise InvalidRecurrence("numbered BYDAY values (e.g. 1MO) need FREQ=MONTHLY or YEARLY")


def _check_rfc_combinations(parts: dict[str, str], freq: str) -> None:
    if "BYWEEKNO" in parts and freq != "YEARLY":
        raise InvalidRecurrence("BYWEEKNO needs FREQ=YEARLY")
    if "BYYEARDAY" in parts and freq in ("MONTHLY", "WEEKLY", "DAILY"):
        raise InvalidRecurrence("BYYEARDAY cannot be used with FREQ=MONTHLY, WEEKLY or DAILY")
    if "BYMONTHDAY" in parts and freq == "WEEKLY":
        raise InvalidRecurrence("BYMONTHDAY cannot be used with FREQ=WEEKLY")
    if "BYSETPOS" in parts and not any(key.startswith("BY") for key in parts if key != "BYSETPOS"):
        raise InvalidRecurrence("BYSETPOS needs another BY rule part (e.g. BYDAY)")


def _check_with_dateutil(core: str, parts: dict[str, str]) -> None:
    # A probe start on the first listed hour/minute/second: dateutil rejects BY lists an
    # HOURLY/MINUTELY interval cannot reach *from the start*, which depends on the anchor.
    first = {
        key: int(parts[key].split(",")[0])
        for key in ("BYHOUR", "BYMINUTE", "BYSECOND")
        if key in parts
    }
    probe = datetime(
        2000, 1, 3, first.get("BYHOUR", 0), first.get("BYMINUTE", 0), first.get("BYSECOND", 0)
    )
    try:
        rrulestr(core, dtstart=probe)
    except (ValueError, KeyError, IndexError) as exc:
        raise InvalidRecurrence(f"invalid rrule: {exc}") from None


def _parse_until(value: str) -> tuple[datetime, str]:
    match = _UNTIL_FORMS.fullmatch(value)
    try:
        if match is None:
            raise ValueError(value)
        day = datetime.strptime(match[1], "%Y%m%d")
        if match[2] is None:
            return datetime.combine(day.date(), time(23, 59, 59)), "date"
        moment = datetime.strptime(match[1] + match[2], "%Y%m%d%H%M%S")
    except ValueError:
        raise InvalidRecurrence(
            "UNTIL must look like 20270101T000000Z (UTC), 20270101T000000 (local time) "
            "or 20270101 (a date, inclusive)"
        ) from None
    return moment, "utc" if match[3] else "local"
