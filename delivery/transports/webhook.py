"""The webhook channel: a Standard-Webhooks-signed JSON POST (the README's "Verifying a
webhook signature")."""

import dataclasses
import functools
import json
import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from delivery.occurrences import has_webhook_data, occurrence_id, webhook_payload
from outbound import http
from outbound.categories import ErrorCategory
from outbound.connections import Connections
from outbound.statuses import TRANSIENT_4XX, parse_retry_after, status_category

from .base import (
    DeliveryResult,
    WebhookMessage,
    http_error_result,
    internal_error_result,
)
from .signing import sign

if TYPE_CHECKING:
    from delivery.models import Notification, WebhookEndpoint

logger = logging.getLogger(__name__)

CHANNEL = "webhook"


def messages(
    notification: "Notification",
    *,
    endpoint: "WebhookEndpoint | None",
    now: datetime,
    deferred: Mapping[str, Any],
) -> dict[str, WebhookMessage | DeliveryResult]:
    """The row's webhook (`message`), its one unit."""
    return {CHANNEL: message(notification, endpoint=endpoint, now=now)}


def message(
    notification: "Notification", *, endpoint: "WebhookEndpoint | None", now: datetime
) -> WebhookMessage | DeliveryResult:
    """The row's webhook to its endpoint, signed with the secrets that sign at `now`; a
    permanent failure when the endpoint is gone or disabled (no call can help), a
    transient one when the payload of the message the row delivers was not loaded (its
    message was deleted meanwhile, taking the row with it): a body without it is never
    sent."""
    if endpoint is None or not endpoint.enabled:
        state = "missing" if endpoint is None else "disabled"
        return DeliveryResult(
            ok=False,
            error=f"webhook endpoint {state}",
            permanent=True,
            category=ErrorCategory.ENDPOINT_DISABLED,
        )
    if not has_webhook_data(notification):
        return DeliveryResult(
            ok=False,
            error="the message's payload was not loaded",
            permanent=False,
            category=ErrorCategory.INTERNAL,
        )
    return signed_message(notification, endpoint=endpoint, now=now)


def signed_message(
    notification: "Notification", *, endpoint: "WebhookEndpoint", now: datetime
) -> WebhookMessage:
    """The row's webhook to `endpoint` (enabled), signed with the secrets that sign at
    `now`."""
    return WebhookMessage(
        url=endpoint.url,
        secrets=tuple(endpoint.signing_secrets(now=now)),
        msg_id=occurrence_id(notification),
        payload=webhook_payload(notification),
    )


def sender(connections: Connections | None) -> Callable[..., DeliveryResult]:
    """Webhooks on the connections kept alive in `connections` (the tick's)."""
    return functools.partial(send_webhook, connections=connections)


def send_webhook(
    message: WebhookMessage,
    *,
    timeout: float,
    connections: Connections | None = None,
    allow_private: bool | None = None,
) -> DeliveryResult:
    """Deliver `message.payload` to `message.url` and classify the outcome, on a connection
    kept in `connections` when given (outbound.connections). `allow_private` overrides
    WEBHOOK_ALLOW_PRIVATE_TARGETS (the tick's sending process has no settings). Never raises.

    webhook-id is `message.msg_id` (identical on every retry, so receivers deduplicate);
    webhook-timestamp is this attempt's time; the signature covers exactly the bytes sent.
    """
    started = time.monotonic()
    try:
        if allow_private is None:
            # Imported here: the tick's sending process passes allow_private and starts
            # faster without Django (sending_child.py).
            from django.conf import settings

            allow_private = settings.WEBHOOK_ALLOW_PRIVATE_TARGETS
        result = _deliver(
            message, timeout=timeout, connections=connections, allow_private=allow_private
        )
    except Exception:
        result = internal_error_result(
            f"webhook to {_origin(message.url)}", logger=logger, secrets=message.secrets
        )
    duration_ms = int((time.monotonic() - started) * 1000)
    return dataclasses.replace(result, duration_ms=duration_ms)


def _deliver(
    message: WebhookMessage, *, timeout: float, connections: Connections | None, allow_private: bool
) -> DeliveryResult:
    if not allow_private and urlsplit(message.url).scheme != "https":
        return DeliveryResult(
            ok=False,
            error="webhook URL must use https",
            permanent=True,
            category=ErrorCategory.SSRF_BLOCKED,
        )
    body = json.dumps(message.payload, separators=(",", ":")).encode()
    timestamp = int(time.time())
    try:
        signature = sign(
            secrets=message.secrets, msg_id=message.msg_id, timestamp=timestamp, body=body
        )
    except ValueError as exc:
        return DeliveryResult(
            ok=False, error=str(exc), permanent=True, category=ErrorCategory.INVALID_REQUEST
        )
    headers = {
        "content-type": "application/json",
        "webhook-id": message.msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature,
    }
    try:
        response = http.post(
            message.url,
            body=body,
            headers=headers,
            timeout=timeout,
            vet_addresses=not allow_private,
            connections=connections,
        )
    except http.HttpError as exc:
        return http_error_result(exc)
    return classify_response(response.status, response.headers)


def classify_response(status: int, headers: Mapping[str, str]) -> DeliveryResult:
    """2xx delivered; 3xx (not followed) and 4xx permanent, except 408/425/429 and 5xx which
    are transient (429/503 may say when to retry); 410 also means: disable the endpoint."""
    if 200 <= status < 300:
        return DeliveryResult(ok=True, http_status=status)
    retry_after = parse_retry_after(headers.get("Retry-After")) if status in (429, 503) else None
    transient = status in TRANSIENT_4XX or status >= 500 or status < 300
    if 300 <= status < 400:
        error = f"webhook answered a redirect (HTTP {status}); redirects are not followed"
    elif status == 410:
        error = "webhook endpoint is gone (HTTP 410)"
    else:
        error = f"webhook answered HTTP {status}"
    return DeliveryResult(
        ok=False,
        error=error,
        permanent=not transient,
        category=status_category(status),
        http_status=status,
        retry_after=retry_after,
        gone=status == 410,
        backpressure=status == 429 or (status == 503 and retry_after is not None),
    )


def _origin(url: str) -> str:
    try:
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.hostname}"
    except ValueError:
        return "an invalid URL"
