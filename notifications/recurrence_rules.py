"""Parsing and validation of RRULE text and IANA zone names for recurring schedules.

Pure functions (stdlib + python-dateutil). ``parse_rule`` turns an accepted RRULE line into
a ``RuleSpec``; every message of ``InvalidRecurrence`` is safe to show to the client.
"""

import re
from dataclasses import dataclass
from datetime import datetime, time
from functools import cache, lru_cache
from importlib import resources
from math import prod
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from dateutil.rrule import DAILY, HOURLY, MINUTELY, MONTHLY, WEEKLY, YEARLY, rrulestr

MAX_COUNT = 10_000  # COUNT rules are walked from their anchor: this bounds the walk.
MAX_INTERVAL = 10_000
FREQUENCIES = {
    "YEARLY": YEARLY,
    "MONTHLY": MONTHLY,
    "WEEKLY": WEEKLY,
    "DAILY": DAILY,
    "HOURLY": HOURLY,
    "MINUTELY": MINUTELY,
}
DAY_PARTS = frozenset({"BYWEEKNO", "BYYEARDAY", "BYMONTHDAY", "BYDAY"})
_PERIOD_NAMES = {
    "YEARLY": "year",
    "MONTHLY": "month",
    "WEEKLY": "week",
    "DAILY": "day",
    "HOURLY": "hour",
    "MINUTELY": "minute",
}
# The time parts that subdivide one period of each frequency.
_TIME_PARTS = {
    "HOURLY": ("BYMINUTE", "BYSECOND"),
    "MINUTELY": ("BYSECOND",),
}
_WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
_ALL_MONTHS = "1,2,3,4,5,6,7,8,9,10,11,12"
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
_BYDAY_ITEM = re.compile(r"([+-]?[0-9]{1,2})?(MO|TU|WE|TH|FR|SA|SU)")
_UNTIL_FORMS = re.compile(r"([0-9]{8})(?:T([0-9]{6})(Z?))?")
_LONGEST_MONTH = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


class InvalidRecurrence(ValueError):
    """str(exc) is a clear, client-safe message."""


@dataclass(frozen=True)
class RuleSpec:
    core: str  # the RRULE without UNTIL, for dateutil
    freq: int
    interval: int
    wkst: int
    parts: frozenset[str]
    months: tuple[int, ...]  # BYMONTH, or all twelve
    until: tuple[datetime, str] | None  # (naive value, "utc" | "local" | "date")


def validate_timezone(name: str) -> None:
    """Raise InvalidRecurrence("unknown time zone 'X'") unless `name` is an IANA name
    (one of `iana_zone_names()`)."""
    zone(name)
    if name not in iana_zone_names():
        raise InvalidRecurrence(f"unknown time zone '{name[:64]}'")


@cache
def iana_zone_names() -> frozenset[str]:
    """The names the IANA time zone database defines (its zones and their backward links
    such as "UTC" or "US/Eastern"), as the tzdata package lists them, that zoneinfo loads.

    Not what the disk happens to hold besides: `localtime` (the server's own zone),
    `posixrules`, the `posix/` and `right/` (leap-second) copies, nor `Factory`, the
    database's placeholder for "not set" rather than a place.
    """
    listed = resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8").split()
    return (frozenset(listed) & available_timezones()) - {"Factory"}


def validate_rrule(text: str) -> None:
    """Raise InvalidRecurrence with a clear message unless `text` is a usable RRULE line.

    Accepted: one RFC 5545 RRULE (optionally prefixed ``RRULE:``) with FREQ from YEARLY
    to MINUTELY, no DTSTART/RDATE/EXDATE/EXRULE, COUNT 1..MAX_COUNT or UNTIL (not both).
    UNTIL may be UTC (``20270101T000000Z``), local wall time (``20270101T000000``) or a
    date (``20270101``: through the end of that local day). BYSETPOS may not exceed the
    most occurrences one period of the rule can hold (such a position never exists).
    """
    parse_rule(text)


def zone(name: str) -> ZoneInfo:
    """The IANA zone `name`; raises InvalidRecurrence for anything else."""
    shown = name[:64] if isinstance(name, str) else str(type(name).__name__)
    if not isinstance(name, str) or not name or name != name.strip():
        raise InvalidRecurrence(f"unknown time zone '{shown}'")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidRecurrence(f"unknown time zone '{shown}'") from None


def month_days_exist(months: tuple[int, ...], month_days: tuple[int, ...]) -> bool:
    """True when some day of `month_days` (negative: from the end) exists in some month."""
    return any(abs(day) <= _LONGEST_MONTH[month] for month in months for day in month_days)


@lru_cache(maxsize=1024)
def parse_rule(text: str) -> RuleSpec:
    """Check `text` and split it into what dateutil parses and what is handled here.

    Raises InvalidRecurrence (client-safe message) for anything validate_rrule rejects.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidRecurrence("rrule must be a non-empty RRULE line such as 'FREQ=DAILY'")
    parts = _split_parts(_rule_value(text.strip()))
    _check_parts(parts)
    if parts.keys() & {"BYHOUR", "BYMINUTE"} and "BYSECOND" not in parts:
        # "every Monday 9:00" fires at 09:00:00, not at the seconds fire_at happened to have.
        parts["BYSECOND"] = "0"
    core = ";".join(f"{key}={value}" for key, value in parts.items() if key != "UNTIL")
    _check_with_dateutil(core, parts)
    return RuleSpec(
        core=core,
        freq=FREQUENCIES[parts["FREQ"]],
        interval=int(parts.get("INTERVAL", "1")),
        wkst=_WEEKDAYS.index(parts.get("WKST", "MO")),
        parts=frozenset(parts),
        months=_int_list(parts.get("BYMONTH", _ALL_MONTHS)),
        until=_parse_until(parts["UNTIL"]) if "UNTIL" in parts else None,
    )


def _rule_value(line: str) -> str:
    if "\n" in line or "\r" in line:
        raise InvalidRecurrence(
            "rrule must be a single RRULE line; DTSTART, RDATE, EXDATE and EXRULE are not "
            "supported (the first occurrence is fire_at)"
        )
    name, colon, rest = line.partition(":")
    if not colon:
        return line
    if name.strip().upper() != "RRULE":
        raise InvalidRecurrence(
            f"unsupported property '{name.strip()[:20]}': rrule takes only the RRULE "
            "value (no DTSTART, RDATE, EXDATE or EXRULE; the first occurrence is fire_at)"
        )
    return rest.strip()


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
    if freq not in FREQUENCIES:
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
    if "BYMONTHDAY" in parts and not month_days_exist(
        _int_list(parts.get("BYMONTH", _ALL_MONTHS)), _int_list(parts["BYMONTHDAY"])
    ):
        raise InvalidRecurrence("BYMONTHDAY never falls in the BYMONTH months (like February 30)")
    if "BYSETPOS" in parts:
        _check_setpos_reachable(parts, freq)


def _check_int(parts: dict[str, str], key: str, low: int, high: int) -> None:
    value = parts.get(key)
    if value is not None and not (_is_ascii_number(value) and low <= int(value) <= high):
        raise InvalidRecurrence(f"{key} must be a whole number from {low} to {high}")


def _is_ascii_number(text: str) -> bool:
    # str.isdigit() also accepts "²" and "①" (which int() refuses) and int() also reads
    # other scripts' digits ("٣"): RFC 5545 numbers are ASCII digits only.
    return text.isascii() and text.isdigit()


def _check_int_list(key: str, value: str, low: int, high: int, signed: bool) -> None:
    allowed = f"-{high}..-{low} or {low}..{high}" if signed else f"{low}..{high}"
    for item in value.split(","):
        digits = item[1:] if signed and item[:1] in "+-" and len(item) > 1 else item
        if not (_is_ascii_number(digits) and low <= int(digits) <= high):
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


def _check_setpos_reachable(parts: dict[str, str], freq: str) -> None:
    # A position beyond the period's set selects nothing in every period: dateutil would
    # then walk period by period to the year 9999 looking for it.
    bound = _days_bound(parts, freq) * _times_bound(parts, freq)
    for position in _int_list(parts["BYSETPOS"]):
        if abs(position) > bound:
            raise InvalidRecurrence(
                f"BYSETPOS={position} never matches: one {_PERIOD_NAMES[freq]} of this rule "
                f"holds at most {bound} occurrence{'s' if bound > 1 else ''}"
            )


def _times_bound(parts: dict[str, str], freq: str) -> int:
    keys = _TIME_PARTS.get(freq, ("BYHOUR", "BYMINUTE", "BYSECOND"))
    return prod(len(set(_int_list(parts[key]))) if key in parts else 1 for key in keys)


def _days_bound(parts: dict[str, str], freq: str) -> int:
    """An upper bound of the days one period holds; each day part only narrows the set."""
    if freq == "WEEKLY" and "BYDAY" in parts:
        return len({item[-2:] for item in parts["BYDAY"].split(",")})
    if freq not in ("YEARLY", "MONTHLY") or not parts.keys() & DAY_PARTS:
        # One day per period, or per listed month: the day is inherited from the anchor.
        return len(_int_list(parts["BYMONTH"])) if freq == "YEARLY" and "BYMONTH" in parts else 1
    size = {key: len(set(parts[key].split(","))) for key in parts}
    # Numbered weekdays and month days count per month for MONTHLY, or for YEARLY with BYMONTH.
    months = size["BYMONTH"] if freq == "YEARLY" and "BYMONTH" in parts else 1
    per_month = freq == "MONTHLY" or "BYMONTH" in parts
    bounds = [366 if freq == "YEARLY" else 31]
    if "BYMONTHDAY" in parts:
        bounds.append(size["BYMONTHDAY"] * (months if per_month else 12))
    if "BYYEARDAY" in parts:
        bounds.append(size["BYYEARDAY"])
    if "BYWEEKNO" in parts:
        bounds.append(7 * size["BYWEEKNO"])
    if "BYDAY" in parts:
        per_weekday = (1, 5) if per_month else (1, 53)  # (numbered, every such weekday)
        weekdays = [per_weekday[len(item) == 2] for item in parts["BYDAY"].split(",")]
        bounds.append(sum(weekdays) * months)
    return min(bounds)


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


def _int_list(value: str) -> tuple[int, ...]:
    return tuple(int(item) for item in value.split(","))
