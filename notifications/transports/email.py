"""The email channel: the Resend HTTP API when RESEND_API_KEY is set, else Django's
EMAIL_BACKEND (SMTP, console, locmem...). DESIGN §6."""

import dataclasses
import json
import logging
import re
import smtplib
import time
from collections.abc import Mapping

from django.conf import settings
from django.core import mail
from django.core.mail.backends.base import BaseEmailBackend

from outbound import http
from outbound.statuses import parse_retry_after, status_category

from .base import (
    DeliveryResult,
    EmailMessage,
    http_error_result,
    internal_error_result,
)

logger = logging.getLogger(__name__)

# Resend's error names (https://resend.com/docs/api-reference/errors) that retrying can fix.
_RESEND_RETRYABLE_409 = "concurrent_idempotent_requests"
_ERROR_NAME = re.compile(r"[a-z0-9_]{1,64}")


def send_email(message: EmailMessage, *, timeout: float) -> DeliveryResult:
    """Send `message` and classify the outcome. Never raises; the Resend key never appears in
    the result or the logs. `message.idempotency_key` is Resend's Idempotency-Key, so a
    retry of the same occurrence is not sent twice."""
    started = time.monotonic()
    try:
        if settings.RESEND_API_KEY:
            result = _send_with_resend(message, timeout=timeout)
        else:
            result = _send_with_backend(message, timeout=timeout)
    except Exception:
        result = internal_error_result("email", logger=logger, secrets=[settings.RESEND_API_KEY])
    duration_ms = int((time.monotonic() - started) * 1000)
    return dataclasses.replace(result, duration_ms=duration_ms)


def _send_with_resend(message: EmailMessage, *, timeout: float) -> DeliveryResult:
    payload = {
        "from": settings.NOTIFICATIONS_EMAIL_FROM,
        "to": list(message.to),
        "subject": message.subject,
        "text": message.body,
    }
    headers = {
        "Authorization": f"Bearer {settings.RESEND_API_KEY}",
        "Content-Type": "application/json",
        "User-Agent": http.USER_AGENT,
        "Idempotency-Key": message.idempotency_key,
    }
    try:
        response = http.post(
            f"{settings.RESEND_API_URL.rstrip('/')}/emails",
            body=json.dumps(payload).encode(),
            headers=headers,
            timeout=timeout,
            # The operator configures this URL; it is not tenant input.
            vet_addresses=False,
        )
    except http.HttpError as exc:
        return http_error_result(exc)
    return classify_resend_response(response.status, response.headers, response.body)


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
        transient = name == _RESEND_RETRYABLE_409
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


def _send_with_backend(message: EmailMessage, *, timeout: float) -> DeliveryResult:
    if not message.to:
        return DeliveryResult(
            ok=False, error="no recipients", permanent=True, category="invalid_request"
        )
    try:
        email = mail.EmailMessage(
            subject=message.subject,
            body=message.body,
            from_email=settings.NOTIFICATIONS_EMAIL_FROM,
            to=list(message.to),
            connection=_backend_connection(timeout),
        )
        email.send(fail_silently=False)
    except (ValueError, smtplib.SMTPException, OSError) as exc:
        return _backend_error_result(exc)
    return DeliveryResult(ok=True)


def _backend_connection(timeout: float) -> BaseEmailBackend:
    try:
        return mail.get_connection(timeout=timeout)
    except TypeError:
        # A third-party backend without a `timeout` argument.
        return mail.get_connection()


def _backend_error_result(exc: Exception) -> DeliveryResult:
    """Bad addresses and 5xx SMTP replies are permanent; timeouts, connection failures,
    authentication problems (an operator fix) and 4xx replies are transient."""
    if _caused_by_timeout(exc):
        return DeliveryResult(ok=False, error="SMTP server timed out", category="timeout")
    if isinstance(exc, ValueError):  # includes BadHeaderError and malformed addresses
        return DeliveryResult(
            ok=False,
            error="invalid email address or header",
            permanent=True,
            category="invalid_request",
        )
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        codes = [code for code, _text in exc.recipients.values()]
        permanent = bool(codes) and all(500 <= code < 600 for code in codes)
        return DeliveryResult(
            ok=False,
            error=f"SMTP server refused the recipients ({', '.join(map(str, codes))})",
            permanent=permanent,
            category="invalid_request" if permanent else "connection",
        )
    if isinstance(exc, smtplib.SMTPResponseException) and not isinstance(
        exc, smtplib.SMTPAuthenticationError
    ):
        permanent = 500 <= exc.smtp_code < 600
        return DeliveryResult(
            ok=False,
            error=f"SMTP server answered {exc.smtp_code}",
            permanent=permanent,
            category="invalid_request" if permanent else "connection",
        )
    return DeliveryResult(
        ok=False, error=f"SMTP delivery failed ({type(exc).__name__})", category="connection"
    )


def _caused_by_timeout(exc: BaseException | None) -> bool:
    # smtplib re-raises a socket timeout as SMTPServerDisconnected; the chain keeps it.
    while exc is not None:
        if isinstance(exc, TimeoutError):
            return True
        exc = exc.__cause__ or exc.__context__
    return False
