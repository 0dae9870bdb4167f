"""What one period of a rule can hold, from its parts as parsed: whether its month days
exist in its months, and at most how many occurrences one period holds (a BYSETPOS beyond
that never matches). Pure arithmetic; the checks that refuse a rule live in
``rules``.
"""

from math import prod

DAY_PARTS = frozenset({"BYWEEKNO", "BYYEARDAY", "BYMONTHDAY", "BYDAY"})
# The time parts that subdivide one period of each frequency.
_TIME_PARTS = {
    "HOURLY": ("BYMINUTE", "BYSECOND"),
    "MINUTELY": ("BYSECOND",),
}
# What dateutil's walk costs, in estimated microseconds of CPU (bench/recurrence.py
# measures them): each occurrence it expands or yields, and each step from one period to
# the next, which scans the new period's days against the BY parts (a year's 366 days cost
# the most; a sub-daily step within a day, the least).
OCCURRENCE_COST = 4
_STEP_COST = {
    "YEARLY": 45,
    "MONTHLY": 10,
    "WEEKLY": 5,
    "DAILY": 3,
    "HOURLY": 1,
    "MINUTELY": 1,
}
# A sub-daily step into a day that the day parts (BYDAY, BYMONTH, BYMONTHDAY...) reject is
# no step within a day: dateutil builds and scans the day's set, then jumps to the day's
# last period before stepping out of it, 3.5-4.1 µs in all where the step is charged 1
# (bench/recurrence.py). The jump is charged this on top.
REJECTED_DAY_COST = 3
_LONGEST_MONTH = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def month_days_exist(months: tuple[int, ...], month_days: tuple[int, ...]) -> bool:
    """True when some day of `month_days` (negative: from the end) exists in some month."""
    return any(abs(day) <= _LONGEST_MONTH[month] for month in months for day in month_days)


def period_cost(parts: dict[str, str], freq: str) -> int:
    """What dateutil's walk may spend on one whole period: its scan and every occurrence
    the period holds."""
    return _STEP_COST[freq] + OCCURRENCE_COST * occurrences_bound(parts, freq)


def step_cost(parts: dict[str, str], freq: str) -> int:
    """What a step into the next period costs before it yields anything: the scan of its
    days, and with BYSETPOS every occurrence of it (dateutil sorts the whole period's set
    to pick positions from it). Each occurrence yielded is charged as it is yielded."""
    expanded = occurrences_bound(parts, freq) if "BYSETPOS" in parts else 0
    return _STEP_COST[freq] + OCCURRENCE_COST * expanded


def occurrences_bound(parts: dict[str, str], freq: str) -> int:
    """An upper bound of the occurrences one period of the rule holds."""
    return _days_bound(parts, freq) * _times_bound(parts, freq)


def _times_bound(parts: dict[str, str], freq: str) -> int:
    keys = _TIME_PARTS.get(freq, ("BYHOUR", "BYMINUTE", "BYSECOND"))
    return prod(len(set(int_list(parts[key]))) if key in parts else 1 for key in keys)


def _days_bound(parts: dict[str, str], freq: str) -> int:
    """An upper bound of the days one period holds; each day part only narrows the set."""
    if freq == "WEEKLY" and "BYDAY" in parts:
        return len({item[-2:] for item in parts["BYDAY"].split(",")})
    if freq not in ("YEARLY", "MONTHLY") or not parts.keys() & DAY_PARTS:
        # One day per period, or per listed month: the day is inherited from the anchor.
        return len(int_list(parts["BYMONTH"])) if freq == "YEARLY" and "BYMONTH" in parts else 1
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


def int_list(value: str) -> tuple[int, ...]:
    return tuple(int(item) for item in value.split(","))
