"""The contract every channel shares: what a delivery attempt produced, and the messages."""

import logging
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from outbound.http import HttpError

# An endpoint must not be able to park a notification for years (or overflow a datetime)
# with an absurd Retry-After; a day is far beyond any sane rate-limit window.
MAX_RETRY_AFTER_SECONDS = 86_400.0

# Statuses where waiting and trying again can succeed (RFC 9110 / RFC 8470 / RFC 6585).
TRANSIENT_4XX = frozenset({408, 425, 429})


@dataclass(frozen=True)
class DeliveryResult:
    """Outcome of one delivery attempt on one channel.

    `error` is a safe summary (no secrets, no URL query strings, no response bodies);
    `permanent` means retrying cannot help; `category` is "" on success, else one of:
    timeout, connection, http_3xx, http_4xx, http_5xx, ssrf_blocked, endpoint_disabled,
    invalid_request, internal. `retry_after` is in seconds (from a 429/503 Retry-After);
    `gone` is set when a webhook answered 410 and its endpoint should be disabled.
    """

    ok: bool
    error: str = ""
    permanent: bool = False
    category: str = ""
    http_status: int | None = None
    retry_after: float | None = None
    gone: bool = False
    duration_ms: int = 0

    @property
    def timed_out(self) -> bool:
        return self.category == "timeout"


@dataclass(frozen=True)
class EmailMessage:
    to: tuple[str, ...]
    subject: str
    body: str
    idempotency_key: str


@dataclass(frozen=True)
class WebhookMessage:
    url: str
    secrets: tuple[str, ...]
    msg_id: str
    payload: dict


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


def status_category(status: int) -> str:
    """The result category of a non-2xx HTTP status."""
    if 300 <= status < 400:
        return "http_3xx"
    if 400 <= status < 500:
        return "http_4xx"
    return "http_5xx"


def http_error_result(exc: HttpError) -> DeliveryResult:
    """A failed exchange that produced no HTTP status: a blocked or malformed address cannot
    improve by retrying; timeouts and connection failures can."""
    permanent = exc.category in ("ssrf_blocked", "invalid_url")
    category = "invalid_request" if exc.category == "invalid_url" else exc.category
    return DeliveryResult(ok=False, error=str(exc), permanent=permanent, category=category)


def internal_error_result(
    channel: str, *, logger: logging.Logger, secrets: Iterable[str]
) -> DeliveryResult:
    """Log the exception being handled with every secret redacted, and return a retryable
    "internal" result: an unexpected failure may be environmental."""
    details = traceback.format_exc()
    for secret in secrets:
        if secret:
            details = details.replace(secret, "[redacted]")
    logger.error("%s delivery failed unexpectedly\n%s", channel, details)
    return DeliveryResult(
        ok=False, error=f"internal error while delivering the {channel}", category="internal"
    )
