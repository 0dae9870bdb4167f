"""What an HTTP answer means for a retry: which statuses are worth retrying, how long the
other side asked us to wait, and the category a failed status is recorded under."""

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from .categories import ErrorCategory

# An endpoint must not be able to park work for years (or overflow a datetime) with an
# absurd Retry-After; a day is far beyond any sane rate-limit window.
MAX_RETRY_AFTER_SECONDS = 86_400.0

# Statuses where waiting and trying again can succeed (RFC 9110 / RFC 8470 / RFC 6585).
TRANSIENT_4XX = frozenset({408, 425, 429})


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date), clamped to
    [0, MAX_RETRY_AFTER_SECONDS]; None when absent or unparseable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_SECONDS)


def status_category(status: int) -> ErrorCategory:
    """The result category of a non-2xx HTTP status."""
    if 300 <= status < 400:
        return ErrorCategory.HTTP_3XX
    if 400 <= status < 500:
        return ErrorCategory.HTTP_4XX
    return ErrorCategory.HTTP_5XX
