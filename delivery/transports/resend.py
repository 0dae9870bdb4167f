"""The Resend API: due emails go out in batches (`POST /emails/batch`, up to 100 a request)
and the answers are read per email (the README's "The scheduler: `run_tick`").

A batch is sent in permissive validation mode, so one malformed email does not sink the
other 99: Resend sends the valid ones and reports the rest by index. The Resend key never
appears in a result or a log line.
"""

import dataclasses
import json
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from outbound import http
from outbound.categories import ErrorCategory
from outbound.connections import Connections
from outbound.statuses import parse_retry_after, status_category

from .base import DeliveryResult, EmailMessage, http_error_result, internal_error_result

logger = logging.getLogger(__name__)

PROVIDER = "resend"  # the name of its send budget (dbqueue.pacing)
BATCH_LIMIT = 100  # Resend's most emails in one batch request
# 100 ids and a few errors; the cap only guards against a runaway answer.
_MAX_ANSWER_BYTES = 64 * 1024
_RETRYABLE_CONFLICT_NAME = "concurrent_idempotent_requests"
_ERROR_NAME = re.compile(r"[a-z0-9_]{1,64}")
# Where a recorded batch keeps an email's footer apart from its text.
_FOOTER = "tickwork_footer"


@dataclass(frozen=True)
class BatchAnswer:
    """What one batch request produced: one result per email in the body's order, and how
    long the provider asked every sender to hold off (a 429's retry-after, or the
    ratelimit-reset of an exhausted budget), in seconds, if it did."""

    results: list[DeliveryResult]
    hold_seconds: float | None = None


def batch_body(messages: Sequence[EmailMessage]) -> str:
    """The exact JSON a batch of `messages` is sent as (recorded before it goes)."""
    emails = []
    for message in messages:
        email: dict[str, Any] = {
            "from": settings.NOTIFICATIONS_EMAIL_FROM,
            "to": list(message.to),
            "subject": message.subject,
            "text": message.body,
        }
        if message.headers:
            # Resend's per-email custom headers (POST /emails/batch: `headers`, an object).
            email["headers"] = dict(message.headers)
        if message.footer:
            # Kept apart until the batch goes (batch_texts_mapped): not Resend's field.
            email[_FOOTER] = message.footer
        emails.append(email)
    return json.dumps(emails, separators=(",", ":"), ensure_ascii=False)


def batch_texts_mapped(
    body: str,
    text_for: Callable[[str, Sequence[str]], str],
    headers_for: Callable[[dict[str, str]], dict[str, str]] = dict,
    footer_for: Callable[[str], str] = str,
) -> str:
    """A recorded batch `body` as it is sent: each email's text replaced by
    text_for(text, to) followed by footer_for(its footer), its headers by
    headers_for(headers), in the JSON batch_body writes; the same arguments always give
    the same bytes."""
    emails = json.loads(body)
    for email in emails:
        email["text"] = text_for(email["text"], email["to"]) + footer_for(email.pop(_FOOTER, ""))
        if "headers" in email:
            email["headers"] = headers_for(email["headers"])
    return json.dumps(emails, separators=(",", ":"), ensure_ascii=False)


def send_batch(
    *, body: str, size: int, key: str, timeout: float, connections: Connections | None = None
) -> BatchAnswer:
    """POST a recorded batch under its idempotency key and read the answer per email, on
    a connection kept in `connections` when given. Never raises."""
    started = time.monotonic()
    try:
        answer = _post_batch(
            body=body, size=size, key=key, timeout=timeout, connections=connections
        )
    except Exception:
        failed = internal_error_result("email", logger=logger, secrets=[settings.RESEND_API_KEY])
        answer = BatchAnswer(results=[failed] * size)
    duration_ms = int((time.monotonic() - started) * 1000)
    results = [dataclasses.replace(r, duration_ms=duration_ms) for r in answer.results]
    return dataclasses.replace(answer, results=results)


def _post_batch(
    *, body: str, size: int, key: str, timeout: float, connections: Connections | None
) -> BatchAnswer:
    headers = {
        "Authorization": f"Bearer {settings.RESEND_API_KEY}",
        "Content-Type": "application/json",
        "User-Agent": http.USER_AGENT,
        "Idempotency-Key": key,
        "x-batch-validation": "permissive",
    }
    try:
        response = http.post(
            f"{settings.RESEND_API_URL.rstrip('/')}/emails/batch",
            body=body.encode(),
            headers=headers,
            timeout=timeout,
            # The operator configures this URL; it is not tenant input.
            vet_addresses=False,
            max_body=_MAX_ANSWER_BYTES,
            connections=connections,
        )
    except http.HttpError as exc:
        return BatchAnswer(results=[http_error_result(exc)] * size)
    hold = _hold_seconds(response.status, response.headers)
    if 200 <= response.status < 300:
        return BatchAnswer(results=_per_email(response.body, size), hold_seconds=hold)
    result = classify_resend_response(response.status, response.headers, response.body)
    return BatchAnswer(results=[result] * size, hold_seconds=hold)


def _per_email(body: bytes, size: int) -> list[DeliveryResult]:
    """A 2xx answer: every email sent but those listed under `errors` by index."""
    refused = DeliveryResult(
        ok=False,
        error="Resend refused this email of the batch (validation)",
        permanent=True,
        category=ErrorCategory.INVALID_REQUEST,
        http_status=422,
    )
    results = [DeliveryResult(ok=True, http_status=200)] * size
    for index in _error_indexes(body):
        if 0 <= index < size:
            results[index] = refused
    return results


def _error_indexes(body: bytes) -> list[int]:
    try:
        errors = json.loads(body).get("errors") or []
    except (ValueError, AttributeError):
        return []
    if not isinstance(errors, list):
        return []
    return [e["index"] for e in errors if isinstance(e, dict) and isinstance(e.get("index"), int)]


def _hold_seconds(status: int, headers: Mapping[str, str]) -> float | None:
    """How long the provider asked us to wait before the next request: a 429's
    retry-after; or, when it reports its budget spent (`ratelimit-remaining: 0`), one
    request's share of the window it reports (`ratelimit-reset` over `ratelimit-limit`):
    its next free request at its own rate, which slows us down when its limit is below
    ours, without idling a whole window on every answer that happened to take the last
    token."""
    if status == 429:
        return parse_retry_after(headers.get("Retry-After")) or 1.0
    if headers.get("ratelimit-remaining", "").strip() != "0":
        return None
    reset = parse_retry_after(headers.get("ratelimit-reset"))
    limit = headers.get("ratelimit-limit", "").strip()
    if reset is None:
        return None
    return reset / int(limit) if limit.isdigit() and int(limit) > 0 else reset


def classify_resend_response(
    status: int, headers: Mapping[str, str], body: bytes
) -> DeliveryResult:
    """Resend's error classes: retry 429 (rate_limit_exceeded), 409
    concurrent_idempotent_requests, 408 and 5xx; everything else (400/401/403/422, 409
    invalid_idempotent_request, 3xx) is permanent."""
    if 200 <= status < 300:
        return DeliveryResult(ok=True, http_status=status)
    name = _error_name(body)
    if status == 409:
        transient = name == _RETRYABLE_CONFLICT_NAME
    else:
        transient = status in (408, 429) or status >= 500
    retry_after = None
    if status in (429, 503):
        retry_after = parse_retry_after(headers.get("Retry-After"))
    suffix = f" ({name})" if name else ""
    return DeliveryResult(
        ok=False,
        error=f"Resend answered HTTP {status}{suffix}",
        permanent=not transient,
        category=status_category(status),
        http_status=status,
        retry_after=retry_after,
        backpressure=status == 429
        or (status == 409 and transient)
        or (status == 503 and retry_after is not None),
    )


def _error_name(body: bytes) -> str:
    """The "name" of a Resend error body, if it looks like one (never free text)."""
    try:
        name = json.loads(body).get("name", "")
    except (ValueError, AttributeError):
        return ""
    return name if isinstance(name, str) and _ERROR_NAME.fullmatch(name) else ""
