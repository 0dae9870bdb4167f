"""Next occurrence of a minutely RRULE anchored five years ago: re-anchored search versus
dateutil's after() walking from DTSTART.

Run: /work/venv/bin/python bench/recurrence.py   (no Django needed)
"""

import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dateutil.rrule import rrulestr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from notifications.recurrence import next_occurrence

RULE = "FREQ=MINUTELY"
ZONE = "Europe/Berlin"


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


def main() -> None:
    figures = measure()
    print(f"next occurrence of {RULE} anchored 5 years ago ({ZONE}):")
    print(f"  next_occurrence (median of {figures['repeats']}): {figures['ours_us']:.1f} us")
    print(
        f"  dateutil after() from DTSTART (median of {figures['naive_runs']}): "
        f"{figures['naive_us'] / 1e6:.2f} s"
    )
    print(f"  ratio: {figures['ratio']}x")


if __name__ == "__main__":
    main()
