"""The contract every channel shares: what a delivery attempt produced, and the messages."""

import logging
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from outbound.categories import ErrorCategory
from outbound.http import HttpError


@dataclass(frozen=True)
class DeliveryResult:
    """Outcome of one delivery attempt on one channel.

    `error` is a safe summary (no secrets, no URL query strings, no response bodies);
    `permanent` means retrying cannot help; `category` is "" on success, else why it
    failed (an ErrorCategory). `retry_after` is in seconds (from a 429/503 Retry-After);
    `gone` is set when a webhook answered 410 and its endpoint should be disabled;
    `backpressure` when the provider said "later", not "no" (429, 503 with Retry-After,
    Resend's rate_limit_exceeded or concurrent_idempotent_requests): a deferral, not a
    failure, until the deferral horizon.
    """

    ok: bool
    error: str = ""
    permanent: bool = False
    category: ErrorCategory | Literal[""] = ""
    http_status: int | None = None
    retry_after: float | None = None
    gone: bool = False
    backpressure: bool = False
    duration_ms: int = 0


@dataclass(frozen=True)
class EmailMessage:
    to: tuple[str, ...]
    subject: str
    body: str
    idempotency_key: str
    # Extra headers (List-Unsubscribe…), in order; as stored, or rendered on the way out.
    headers: tuple[tuple[str, str], ...] = ()
    # What the engine ends the body with (an unsubscribe link), apart from the client's
    # text: only its link references are rendered into tokens (delivery.header_tokens).
    # As stored; on the way out it is rendered into the body and this is empty.
    footer: str = ""


@dataclass(frozen=True)
class WebhookMessage:
    url: str
    secrets: tuple[str, ...]
    msg_id: str
    payload: dict


def http_error_result(exc: HttpError) -> DeliveryResult:
    """A failed exchange that produced no HTTP status: a blocked or malformed address cannot
    improve by retrying; timeouts and connection failures can."""
    permanent = exc.category in (ErrorCategory.SSRF_BLOCKED, ErrorCategory.INVALID_REQUEST)
    return DeliveryResult(ok=False, error=str(exc), permanent=permanent, category=exc.category)


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
        ok=False,
        error=f"internal error while delivering the {channel}",
        category=ErrorCategory.INTERNAL,
    )
