"""The email channel through Django's configured backend (the EMAIL_BACKEND variable: SMTP,
console, locmem...; outbound.mailers), one message per recipient's copy (delivery.copies).
With RESEND_API_KEY set, emails go out in Resend batches instead (resend.py and the tick's
mail batches). The README's "The scheduler: `run_tick`" tells both apart."""

import dataclasses
import logging
import smtplib
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core import mail

from delivery import header_tokens
from delivery.copies import EmailCopy, copies_of, outgoing_copies
from delivery.occurrences import occurrence_id
from outbound import mailers
from outbound.categories import ErrorCategory
from outbound.connections import Connections
from tenancy import link_tokens

from .base import DeliveryResult, EmailMessage, internal_error_result

if TYPE_CHECKING:
    from delivery.models import Notification, WebhookEndpoint

logger = logging.getLogger(__name__)

CHANNEL = "email"
NO_RECIPIENTS = DeliveryResult(
    ok=False, error="no recipients", permanent=True, category=ErrorCategory.INVALID_REQUEST
)


def messages(
    notification: "Notification",
    *,
    endpoint: "WebhookEndpoint | None",
    now: datetime,
    deferred: Mapping[str, Any],
) -> dict[str, EmailMessage | DeliveryResult]:
    """The row's copies that go now (delivery.copies), by unit, as they go out: their link
    references rendered into tokens. A row with no address at all fails, unsent."""
    copies = outgoing_copies(notification, deferred)
    if not copies and not copies_of(notification):
        return {CHANNEL: NO_RECIPIENTS}
    return {copy.unit: rendered(copy_message(notification, copy)) for copy in copies}


def sender(connections: Connections | None) -> Callable[..., DeliveryResult]:
    """One email at a time through the EMAIL_BACKEND (its own connections)."""
    return send_email


def copy_message(notification: "Notification", copy: EmailCopy) -> EmailMessage:
    """One copy of the row's email as stored: link references where link tokens go (what a
    recorded batch holds)."""
    return EmailMessage(
        to=(copy.to,),
        subject=notification.subject,
        body=notification.body,
        idempotency_key=f"{occurrence_id(notification)}_{copy.key}",
        headers=copy.headers,
        footer=copy.footer,
    )


def rendered(stored: EmailMessage) -> EmailMessage:
    """A stored email as it goes out: its link references rendered into tokens."""
    return dataclasses.replace(
        stored,
        body=with_links(stored.body, stored.to) + header_tokens.rendered(stored.footer),
        headers=tuple(header_tokens.rendered_headers(dict(stored.headers)).items()),
        footer="",
    )


def with_links(text: str, recipients: Sequence[str]) -> str:
    """`text` as it goes out to `recipients`: its link references rendered into tokens
    (tenancy.link_tokens). Only the transport sees the result; nothing stores it."""
    return link_tokens.render(text, recipients=recipients, secret=settings.SECRET_KEY)


def send_email(message: EmailMessage, *, timeout: float) -> DeliveryResult:
    """Send `message` through the EMAIL_BACKEND and classify the outcome. Never raises."""
    started = time.monotonic()
    try:
        result = _send_with_backend(message, timeout=timeout)
    except Exception:
        result = internal_error_result("email", logger=logger, secrets=[])
    duration_ms = int((time.monotonic() - started) * 1000)
    return dataclasses.replace(result, duration_ms=duration_ms)


def _send_with_backend(message: EmailMessage, *, timeout: float) -> DeliveryResult:
    if not message.to:
        return NO_RECIPIENTS
    try:
        email = mail.EmailMessage(
            subject=message.subject,
            body=message.body,
            from_email=settings.NOTIFICATIONS_EMAIL_FROM,
            to=list(message.to),
            headers=dict(message.headers),
        )
        mailers.default_mailer(timeout=timeout).send_messages([email])
    except (ValueError, smtplib.SMTPException, OSError) as exc:
        return _backend_error_result(exc)
    return DeliveryResult(ok=True)


def _backend_error_result(exc: Exception) -> DeliveryResult:
    """Bad addresses and 5xx SMTP replies are permanent; timeouts, connection failures,
    authentication problems (an operator fix) and 4xx replies are transient."""
    if _caused_by_timeout(exc):
        return DeliveryResult(
            ok=False, error="SMTP server timed out", category=ErrorCategory.TIMEOUT
        )
    if isinstance(exc, ValueError):  # includes BadHeaderError and malformed addresses
        return DeliveryResult(
            ok=False,
            error="invalid email address or header",
            permanent=True,
            category=ErrorCategory.INVALID_REQUEST,
        )
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        codes = [code for code, _text in exc.recipients.values()]
        permanent = bool(codes) and all(500 <= code < 600 for code in codes)
        return DeliveryResult(
            ok=False,
            error=f"SMTP server refused the recipients ({', '.join(map(str, codes))})",
            permanent=permanent,
            category=ErrorCategory.INVALID_REQUEST if permanent else ErrorCategory.CONNECTION,
        )
    if isinstance(exc, smtplib.SMTPResponseException) and not isinstance(
        exc, smtplib.SMTPAuthenticationError
    ):
        permanent = 500 <= exc.smtp_code < 600
        return DeliveryResult(
            ok=False,
            error=f"SMTP server answered {exc.smtp_code}",
            permanent=permanent,
            category=ErrorCategory.INVALID_REQUEST if permanent else ErrorCategory.CONNECTION,
        )
    return DeliveryResult(
        ok=False,
        error=f"SMTP delivery failed ({type(exc).__name__})",
        category=ErrorCategory.CONNECTION,
    )


def _caused_by_timeout(exc: BaseException | None) -> bool:
    # smtplib re-raises a socket timeout as SMTPServerDisconnected; the chain keeps it.
    while exc is not None:
        if isinstance(exc, TimeoutError):
            return True
        exc = exc.__cause__ or exc.__context__
    return False
