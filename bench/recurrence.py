"""Next occurrence of a minutely RRULE anchored five years ago: re-anchored search versus
dateutil's after() walking from DTSTART. Then the worst cases: accepted rules that never
match (the search stops at its horizon) and sparse rules whose next match is years away.

Run: /work/venv/bin/python bench/recurrence.py   (no Django needed)
"""

import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dateutil.rrule import rrulestr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from delivery.recurrence import RuleTooCostly, next_occurrence

RULE = "FREQ=MINUTELY"
ZONE = "Europe/Berlin"
# Accepted by validate_rrule, matching nothing: unbounded, dateutil takes seconds on each.
NEVER_MATCHING = (
    "FREQ=YEARLY;BYMONTH=1;BYYEARDAY=100",
    "FREQ=MONTHLY;BYDAY=MO;BYMONTHDAY=1,2;BYSETPOS=2",
    "FREQ=DAILY;INTERVAL=7;BYDAY=TU",
    "FREQ=DAILY;INTERVAL=9996;BYDAY=TU",
    "FREQ=HOURLY;INTERVAL=168;BYDAY=TU",
    "FREQ=HOURLY;BYMONTH=1;BYYEARDAY=100",
    "FREQ=MINUTELY;BYMONTH=1;BYYEARDAY=100",
)
# Next match 8 years away (2100 is not a leap year).
SPARSE = (
    "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29",
    "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29",
    "FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=29",
)


def measure(repeats: int = 2000, *, naive_runs: int = 1) -> dict:
    """Median microseconds per next-occurrence computation for both approaches.

    Returns {"ours_us", "naive_us", "ratio", "repeats", "naive_runs"}; ours is the median
    of `repeats` calls; the naive walk takes seconds per call, so it runs `naive_runs`
    times. Raises AssertionError if the two disagree.
    """
    now = datetime.now(UTC).replace(microsecond=0)
    anchor = now - timedelta(days=5 * 365)
    ours = []
    for offset in range(repeats):
        after = now + timedelta(seconds=offset)
        started = time.perf_counter()
        found = next_occurrence(rrule=RULE, tz_name=ZONE, anchor=anchor, after=after)
        ours.append(time.perf_counter() - started)
    naive = []
    walk = rrulestr(RULE, dtstart=anchor)
    for _ in range(naive_runs):
        started = time.perf_counter()
        expected = walk.after(now + timedelta(seconds=repeats - 1))
        naive.append(time.perf_counter() - started)
    if found != expected:
        raise AssertionError(f"results differ: {found} != {expected}")
    ours_us = statistics.median(ours) * 1e6
    naive_us = statistics.median(naive) * 1e6
    return {
        "ours_us": round(ours_us, 1),
        "naive_us": round(naive_us, 1),
        "ratio": round(naive_us / ours_us),
        "repeats": repeats,
        "naive_runs": naive_runs,
    }


def measure_worst_cases(repeats: int = 5) -> dict[str, tuple[float, datetime | str | None]]:
    """{rule: (median milliseconds, result)} for NEVER_MATCHING (anchored on a Monday in
    2025) and SPARSE (asked on 1 March 2096) rules."""
    anchor = datetime(2025, 1, 6, 8, 0, tzinfo=UTC)
    leap_anchor = datetime(2024, 2, 29, 8, 0, tzinfo=UTC)
    cases = [(rule, anchor, anchor) for rule in NEVER_MATCHING]
    cases += [(rule, leap_anchor, datetime(2096, 3, 1, tzinfo=UTC)) for rule in SPARSE]
    figures = {}
    for rule, start, after in cases:
        runs = []
        for _ in range(repeats):
            started = time.perf_counter()
            try:
                found = next_occurrence(rrule=rule, tz_name=ZONE, anchor=start, after=after)
            except RuleTooCostly:
                found = "too costly"
            runs.append(time.perf_counter() - started)
        figures[rule] = (round(statistics.median(runs) * 1e3, 1), found)
    return figures


# Shapes that stress each part of the work estimate (recurrence.bounds): occurrences in a
# zone with DST, a year's scan per step, filtered days of a sub-daily rule, long BY lists.
CALIBRATION = (
    (
        "FREQ=DAILY;COUNT=2000",
        datetime(2024, 2, 29, 8, tzinfo=UTC),
        datetime(9999, 1, 1, tzinfo=UTC),
    ),
    (
        "FREQ=YEARLY;BYDAY=MO,TU,WE,TH,FR,SA,SU;BYHOUR=9,17",
        datetime(2024, 2, 29, 8, tzinfo=UTC),
        datetime(2026, 12, 30, tzinfo=UTC),
    ),
    (
        "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO",
        datetime(2024, 2, 29, 8, tzinfo=UTC),
        datetime(2024, 3, 1, tzinfo=UTC),
    ),
    (
        "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
        datetime(2024, 2, 29, 8, tzinfo=UTC),
        datetime(2026, 12, 31, 20, tzinfo=UTC),
    ),
    (
        "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29",
        datetime(2024, 2, 29, 8, tzinfo=UTC),
        datetime(2024, 3, 1, tzinfo=UTC),
    ),
    (
        "FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=29",
        datetime(2024, 2, 29, 8, tzinfo=UTC),
        datetime(2024, 3, 1, tzinfo=UTC),
    ),
    (
        "FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=29",
        datetime(2024, 2, 29, 8, tzinfo=UTC),
        datetime(2024, 3, 1, tzinfo=UTC),
    ),
    (
        "FREQ=MINUTELY;INTERVAL=11;BYMINUTE=7;BYHOUR=3;BYDAY=MO",
        datetime(2026, 11, 30, 2, 56, tzinfo=UTC),
        datetime(2026, 11, 30, 3, 7, tzinfo=UTC),
    ),
    (
        "FREQ=DAILY;BYHOUR=9,10,11,12,13,14,15,16,17;BYMINUTE=" + ",".join(map(str, range(60))),
        datetime(2024, 2, 29, 8, tzinfo=UTC),
        datetime(2026, 12, 30, 20, tzinfo=UTC),
    ),
)


def measure_work_estimate(repeats: int = 5) -> list[tuple[str, int, float]]:
    """[(rule, work counted, best CPU ms)]: the work estimate (estimated µs) beside the CPU
    the search took; CPU µs ÷ work above 1 is where the estimate is short and the CPU
    backstop bounds the search."""
    from delivery.recurrence.cost import CpuBudget
    from delivery.recurrence.walk import occurrence_after

    figures = []
    for rule, anchor, threshold in CALIBRATION:
        best, work = float("inf"), 0
        for _ in range(repeats):
            meter = CpuBudget(limit_ms=1e9).meter()
            started = time.thread_time()
            occurrence_after(rule, ZONE, anchor, threshold=threshold, meter=meter)
            best = min(best, time.thread_time() - started)
            work = meter.work
        figures.append((rule, work, best * 1e3))
    return figures


def main() -> None:
    figures = measure()
    print(f"next occurrence of {RULE} anchored 5 years ago ({ZONE}):")
    print(f"  next_occurrence (median of {figures['repeats']}): {figures['ours_us']:.1f} us")
    print(
        f"  dateutil after() from DTSTART (median of {figures['naive_runs']}): "
        f"{figures['naive_us'] / 1e6:.2f} s"
    )
    print(f"  ratio: {figures['ratio']}x")
    print("worst cases (median ms -> next occurrence):")
    for rule, (millis, found) in measure_worst_cases().items():
        shown = found.isoformat() if isinstance(found, datetime) else found or "None (ended)"
        print(f"  {millis:6.1f} ms  {rule:48} -> {shown}")
    print("work estimate (RECURRENCE_BUDGET_MS counts work; CPU us per unit of work):")
    for rule, work, millis in measure_work_estimate():
        ratio = millis * 1e3 / work
        print(f"  {work:7d} work  {millis:7.2f} ms CPU  {ratio:5.2f} us/unit  {rule[:60]}")


if __name__ == "__main__":
    main()
