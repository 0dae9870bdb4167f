"""Rates such as `600/min`: how many requests a limit lets through per period.

Kept free of models so the settings can validate a rate at start-up with the same parser
the throttles use.
"""

from dataclasses import dataclass
from functools import cache

_PERIODS = {
    "s": 1, "sec": 1, "second": 1,
    "m": 60, "min": 60, "minute": 60,
    "h": 3600, "hour": 3600,
    "d": 86_400, "day": 86_400,
}  # fmt: skip


@dataclass(frozen=True)
class Rate:
    limit: int
    period_seconds: int


@cache
def parse_rate(text: str) -> Rate:
    """`<positive count>/<s|sec|second|m|min|minute|h|hour|d|day>`; ValueError otherwise."""
    count, separator, period = text.strip().partition("/")
    if not separator or not count.strip().isascii() or not count.strip().isdigit():
        raise ValueError(f"a rate is '<count>/<period>' such as '600/min', got {text!r}")
    if period.strip() not in _PERIODS:
        raise ValueError(f"the period must be one of {', '.join(_PERIODS)}, got {period!r}")
    limit = int(count)
    if limit <= 0:
        raise ValueError(f"the count must be greater than zero, got {text!r}")
    return Rate(limit=limit, period_seconds=_PERIODS[period.strip()])
