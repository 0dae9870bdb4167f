"""Send windows: when a recipient may be e-mailed, in their own time zone. Pure functions,
no Django.

A window is {"days": ["MO".."SU"], "from": "HH:MM", "until": "HH:MM"}: it opens on each
named day at `from`, local time, and closes at `until` — the same day, or the next one when
`until` is not after `from` (22:00 to 06:00 runs overnight). Times are compared as instants,
so a DST change moves nothing: a window opening at a wall-clock time that does not exist
(spring forward) opens when the clock jumps past it (02:30 becomes 03:30 in Berlin); one
opening at a time that happens twice (fall back) opens at the first.
"""

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, time, timedelta
from functools import cache
from typing import Any
from zoneinfo import ZoneInfo

DAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
_HH_MM = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9])$")


def window_errors(window: Any) -> list[str]:
    """What is wrong with `window` as a send window (empty: nothing)."""
    if not isinstance(window, Mapping):
        return ["Must be an object {days, from, until}."]
    errors = []
    unknown = set(window) - {"days", "from", "until"}
    if unknown:
        errors.append(f"Unknown keys: {sorted(str(k)[:32] for k in unknown)}.")
    days = window.get("days")
    if (
        not isinstance(days, list)
        or not days
        or not all(isinstance(d, str) and d in DAYS for d in days)
        or len(set(days)) != len(days)
    ):
        errors.append(f"days must be a non-empty list of distinct values among {list(DAYS)}.")
    for name in ("from", "until"):
        value = window.get(name)
        if not isinstance(value, str) or not _HH_MM.match(value):
            errors.append(f"{name} must be a time HH:MM (00:00 to 23:59).")
    if not errors and window["from"] == window["until"]:
        errors.append("from and until must differ.")
    return errors


@cache
def _clock(value: str) -> time:
    hours, minutes = value.split(":")
    return time(int(hours), int(minutes))


def _instant(day: date, at: time, zone: ZoneInfo) -> datetime:
    """Wall-clock `at` on `day` in `zone` as a UTC instant: in a DST gap, moved forward by
    the gap; when repeated, the first (fold=0)."""
    return datetime.combine(day, at, tzinfo=zone).astimezone(UTC)


def _spans(
    window: Mapping[str, Any], zone: ZoneInfo, around: date, offsets: range
) -> Iterable[tuple]:
    """(opens, closes) instants of the window's openings on the days `offsets` away from
    `around`, in order."""
    opens, closes = _clock(window["from"]), _clock(window["until"])
    overnight = closes <= opens
    for offset in offsets:
        day = around + timedelta(days=offset)
        if DAYS[day.weekday()] not in window["days"]:
            continue
        end_day = day + timedelta(days=1) if overnight else day
        yield _instant(day, opens, zone), _instant(end_day, closes, zone)


def next_opening(window: Mapping[str, Any] | None, tz_name: str, now: datetime) -> datetime | None:
    """None when `now` lies inside the window (or there is none): send now. Otherwise the
    instant the window next opens, after `now`."""
    if not window:
        return None
    zone = ZoneInfo(tz_name)
    local_day = now.astimezone(zone).date()
    # Open now only in an opening of yesterday (overnight) or today; the next one may be
    # up to a week away.
    for opens, closes in _spans(window, zone, local_day, range(-1, 1)):
        if opens <= now < closes:
            return None
    return min(
        (opens for opens, _ in _spans(window, zone, local_day, range(0, 9)) if opens > now),
        default=None,
    )
