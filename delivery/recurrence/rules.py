"""Parsing and validation of RRULE text for recurring schedules.

Pure functions (stdlib + python-dateutil). ``parse_rule`` turns an accepted RRULE line into
a ``RuleSpec``; every message of ``InvalidRecurrence`` is safe to show to the client. What
one period of a rule can hold is counted in ``bounds``; IANA zone names are
checked in ``zones``.
"""

import re
from dataclasses import dataclass
from datetime import datetime, time
from functools import lru_cache

from dateutil.rrule import DAILY, HOURLY, MINUTELY, MONTHLY, WEEKLY, YEARLY, rrulestr

from delivery.recurrence.bounds import (
    int_list,
    month_days_exist,
    occurrences_bound,
    period_cost,
    step_cost,
)

MAX_COUNT = 10_000  # COUNT rules are walked from their anchor: this bounds the walk.
MAX_INTERVAL = 10_000
# The most occurrences one period of a rule may hold. dateutil expands a period's BY lists
# in full (a YEARLY rule with every BYMINUTE and BYSECOND: 1.3 million candidates a year),
# and a search expands up to two periods, so this is what keeps the cost of every rule
# shape within RECURRENCE_BUDGET_MS; it is checked before dateutil sees the rule.
MAX_PERIOD_OCCURRENCES = 1_000
FREQUENCIES = {
    "YEARLY": YEARLY,
    "MONTHLY": MONTHLY,
    "WEEKLY": WEEKLY,
    "DAILY": DAILY,
    "HOURLY": HOURLY,
    "MINUTELY": MINUTELY,
}
_PERIOD_NAMES = {
    "YEARLY": "year",
    "MONTHLY": "month",
    "WEEKLY": "week",
    "DAILY": "day",
    "HOURLY": "hour",
    "MINUTELY": "minute",
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


class InvalidRecurrence(ValueError):
    """str(exc) is a clear, client-safe message."""


class RuleTooCostly(InvalidRecurrence):
    """The rule's occurrences could not be found within the budget, or one period of it
    holds too many to search; str(exc) says why and is safe to show the client."""


@dataclass(frozen=True)
class RuleSpec:
    core: str  # the RRULE without UNTIL, for dateutil
    freq: int
    interval: int
    wkst: int
    parts: frozenset[str]
    months: tuple[int, ...]  # BYMONTH, or all twelve
    until: tuple[datetime, str] | None  # (naive value, "utc" | "local" | "date")
    period: str  # what one period of FREQ is called: "year", "month"...
    period_cost: int  # what dateutil may spend on one whole period (recurrence.cost)
    step_cost: int  # what a step into a period costs before any occurrence is yielded


def validate_rrule(text: str) -> None:
    """Raise InvalidRecurrence with a clear message unless `text` is a usable RRULE line.

    Accepted: one RFC 5545 RRULE (optionally prefixed ``RRULE:``) with FREQ from YEARLY
    to MINUTELY, no DTSTART/RDATE/EXDATE/EXRULE, COUNT 1..MAX_COUNT or UNTIL (not both).
    UNTIL may be UTC (``20270101T000000Z``), local wall time (``20270101T000000``) or a
    date (``20270101``: through the end of that local day). BYSETPOS may not exceed the
    most occurrences one period of the rule can hold (such a position never exists).
    """
    parse_rule(text)


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
        months=int_list(parts.get("BYMONTH", _ALL_MONTHS)),
        until=_parse_until(parts["UNTIL"]) if "UNTIL" in parts else None,
        period=_PERIOD_NAMES[parts["FREQ"]],
        period_cost=period_cost(parts, parts["FREQ"]),
        step_cost=step_cost(parts, parts["FREQ"]),
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
        int_list(parts.get("BYMONTH", _ALL_MONTHS)), int_list(parts["BYMONTHDAY"])
    ):
        raise InvalidRecurrence("BYMONTHDAY never falls in the BYMONTH months (like February 30)")
    if "BYSETPOS" in parts:
        _check_setpos_reachable(parts, freq)
    _check_period_size(parts, freq)


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
    bound = occurrences_bound(parts, freq)
    for position in int_list(parts["BYSETPOS"]):
        if abs(position) > bound:
            raise InvalidRecurrence(
                f"BYSETPOS={position} never matches: one {_PERIOD_NAMES[freq]} of this rule "
                f"holds at most {bound} occurrence{'s' if bound > 1 else ''}"
            )


def _check_period_size(parts: dict[str, str], freq: str) -> None:
    bound = occurrences_bound(parts, freq)
    if bound > MAX_PERIOD_OCCURRENCES:
        period = _PERIOD_NAMES[freq]
        raise RuleTooCostly(
            f"rrule is too costly: one {period} of it can hold {bound:,} occurrences (its BY "
            f"lists multiply), more than the {MAX_PERIOD_OCCURRENCES:,} a {period} may hold. "
            "Use a finer FREQ with shorter BY lists (for example FREQ=MINUTELY instead of "
            "every BYMINUTE, or FREQ=HOURLY instead of every BYHOUR)."
        )


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
