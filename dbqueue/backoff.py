"""When a failed unit of work runs again: the backoff schedule, stretched by Retry-After."""

from collections.abc import Sequence


def backoff_seconds(*, failures_before: int, steps: Sequence[int]) -> int:
    """The wait after a failure when `failures_before` failures preceded it (0-based): that
    step of `steps`, clamped at the last one, so more attempts keep the longest wait."""
    return steps[min(max(failures_before, 0), len(steps) - 1)]


def retry_delay(*, failures_before: int, steps: Sequence[int], retry_after: float | None) -> float:
    """Seconds until the retry: the backoff step, or longer if the other side asked for it."""
    delay = float(backoff_seconds(failures_before=failures_before, steps=steps))
    if retry_after is not None:
        delay = max(delay, retry_after)
    return delay
