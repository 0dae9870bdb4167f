"""Writes of webhook endpoints: create with a fresh secret, change, delete, rotate.

Every function looks rows up within the given tenant only, so another tenant's endpoint
raises `DoesNotExist` exactly like a missing one. An unsafe URL raises `InvalidInput`.
"""

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils.timezone import now as utc_now

from dbqueue.slots import slots_delete
from delivery.models import WebhookEndpoint, slot_scope
from delivery.transports.signing import generate_secret
from outbound.ssrf import UnsafeWebhookUrl, validate_webhook_url
from tenancy.models import Tenant
from tenancy.quotas import hold_count_limit
from web.errors import Conflict, InvalidInput
from webhooks.applications import (
    APPLICATION_MISSING,
    application_filter_id,
    application_locked,
    live_applications,
)
from webhooks.event_types import active_event_type_errors
from webhooks.lifecycle import endpoint_unpark
from webhooks.models import Application

# Each secret in grace adds a signature to every delivery; rotating faster than the grace
# period ends keeps this many signing (the ones retired last).
MAX_RETIRED_SECRETS = 10


class ApplicationDeleted(Conflict):
    kind = "application-deleted"

    def __init__(self) -> None:
        super().__init__(
            "The endpoint's application was deleted, so the endpoint stays disabled; create "
            "an endpoint for a live application instead."
        )


# An argument left out, where None means something (event_types: None subscribes to
# every type; rate_limit: None removes the limit).
UNCHANGED: Any = object()


def endpoint_pages(*, tenant: Tenant, application: str | None = None) -> QuerySet[WebhookEndpoint]:
    """The tenant's endpoints (those of the application named by id or uid — a deleted one
    by its id —, if given)."""
    endpoints = WebhookEndpoint.objects.filter(tenant=tenant)
    if application is None:
        return endpoints
    application_id = application_filter_id(tenant_id=tenant.id, key=application)
    if application_id is None:
        return endpoints.none()
    return endpoints.filter(application_id=application_id)


# The `disabled_reason` of an endpoint switched off through the API (PATCH `disabled`).
DISABLED_MANUALLY = "manual"


def webhook_endpoint_create(
    *,
    tenant: Tenant,
    url: str,
    description: str = "",
    enabled: bool = True,
    event_types: Sequence[str] | None = None,
    rate_limit: int | None = None,
    application: str | None = None,
    now: datetime | None = None,
) -> WebhookEndpoint:
    """Create an endpoint with a fresh signing secret (readable on the returned instance,
    to be shown once), subscribed to `event_types` (None: every type; each must be an
    active type of the tenant, else InvalidInput), belonging to the live `application`
    named by id or uid (None: the tenant's own endpoint; an unknown one is InvalidInput).
    The application is the endpoint's for good, as an endpoint lives under its application
    in Svix: messages to that customer are what it was given to receive."""
    now = now or utc_now()
    _check_url(url)
    with transaction.atomic():
        application_id = None
        if application is not None:
            # Held until the endpoint is in: a deletion of the application waits for it,
            # then disables it with the others.
            try:
                application_id = application_locked(tenant_id=tenant.id, key=application).pk
            except Application.DoesNotExist:
                raise InvalidInput({"application": [APPLICATION_MISSING]}) from None
        hold_count_limit(tenant, "webhook_endpoints")
        return WebhookEndpoint.objects.create(
            tenant=tenant,
            application_id=application_id,
            url=url,
            description=description,
            enabled=enabled,
            event_types=_checked_event_types(tenant, event_types),
            rate_limit=rate_limit,
            secret=generate_secret(),
            created_at=now,
            updated_at=now,
        )


def webhook_endpoint_update(
    *,
    tenant: Tenant,
    endpoint_id: UUID,
    url: str | None = None,
    description: str | None = None,
    enabled: bool | None = None,
    disabled_reason: str = DISABLED_MANUALLY,
    event_types: Sequence[str] | None = UNCHANGED,
    rate_limit: int | None = UNCHANGED,
    now: datetime | None = None,
) -> WebhookEndpoint:
    """Change the URL, the description, the subscribed `event_types` (None: every type), the
    `rate_limit`
    and/or switch the endpoint on or off (enabling clears the reason it was disabled and
    its failing streak, and un-parks the deliveries parked when it was disabled as failing;
    disabling records `disabled_reason`). A new URL closes the circuit: the failures were
    another receiver's. An endpoint deleted meanwhile raises DoesNotExist, like a missing
    one; enabling an endpoint whose application was deleted raises ApplicationDeleted."""
    if url is not None:
        _check_url(url)  # resolves the host: done before the transaction, not inside it
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint_id, tenant=tenant)
        fields = ["url", "enabled", "disabled_reason", "rate_limit", "updated_at"]
        if event_types is not UNCHANGED:
            endpoint.event_types = _checked_event_types(tenant, event_types)
            fields.append("event_types")
        if rate_limit is not UNCHANGED:
            endpoint.rate_limit = rate_limit
        if description is not None:
            endpoint.description = description
            fields.append("description")
        if url is not None and url != endpoint.url:
            endpoint.url = url
            fields += _close_circuit(endpoint)
        enabling = enabled is True and not endpoint.enabled
        if enabling and endpoint.application_id is not None:
            _check_application_live(tenant, endpoint.application_id)
        if enabled is not None:
            endpoint.enabled = enabled
            endpoint.disabled_reason = "" if enabled else disabled_reason
        endpoint.updated_at = now or utc_now()
        if enabling:
            # A fresh start: the failures that disabled it do not count against it again.
            fields += _close_circuit(endpoint)
        endpoint.save(update_fields=list(dict.fromkeys(fields)))
        if enabling:
            endpoint_unpark(endpoint, now=endpoint.updated_at)
    return endpoint


def webhook_endpoint_delete(*, tenant: Tenant, endpoint_id: UUID) -> None:
    """Delete the endpoint and its delivery slots; notifications that used it keep running
    without it (their webhook channel then fails as a missing endpoint)."""
    with transaction.atomic():
        deleted, _ = WebhookEndpoint.objects.filter(pk=endpoint_id, tenant=tenant).delete()
        if not deleted:
            raise WebhookEndpoint.DoesNotExist
        slots_delete(slot_scope(endpoint_id))


def webhook_endpoint_rotate_secret(
    *, tenant: Tenant, endpoint_id: UUID, now: datetime | None = None
) -> WebhookEndpoint:
    """Replace the secret; the old one keeps signing for WEBHOOK_SECRET_GRACE_SECONDS so
    receivers can switch over, and so does every secret an earlier rotation retired whose
    grace has not ended (a repeated rotation never cuts off the secret a receiver still
    checks; at most MAX_RETIRED_SECRETS are kept, the ones retired last). Rotating closes
    the circuit (a receiver that refused the old signatures gets a fresh chance). The row
    lock makes concurrent rotations take turns, so the secret each caller is shown is the
    one that was stored."""
    now = now or utc_now()
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint_id, tenant=tenant)
        until = now + timedelta(seconds=settings.WEBHOOK_SECRET_GRACE_SECONDS)
        retired = {"secret": endpoint.secret, "until": until.isoformat()}
        still_signing = endpoint.secrets_in_grace(now=now)
        endpoint.retired_secrets = [retired, *still_signing][:MAX_RETIRED_SECRETS]
        endpoint.secret = generate_secret()
        endpoint.updated_at = now
        circuit = _close_circuit(endpoint)
        endpoint.save(update_fields=["secret", "retired_secrets", "updated_at", *circuit])
    return endpoint


def _close_circuit(endpoint: WebhookEndpoint) -> list[str]:
    """Close the endpoint's circuit breaker; returns the fields it changed."""
    endpoint.consecutive_failures = 0
    endpoint.circuit_open_until = None
    endpoint.circuit_interval_seconds = 0
    endpoint.failed_deliveries = 0
    endpoint.failing_since = None
    return [
        "consecutive_failures",
        "circuit_open_until",
        "circuit_interval_seconds",
        "failed_deliveries",
        "failing_since",
    ]


def _checked_event_types(tenant: Tenant, names: Sequence[str] | None) -> list[str] | None:
    if names is None:
        return None
    names = list(dict.fromkeys(names))
    errors = active_event_type_errors(tenant_id=tenant.id, names=names)
    if errors:
        raise InvalidInput({"event_types": errors})
    return names


def _check_application_live(tenant: Tenant, application_id: UUID) -> None:
    if not live_applications(tenant.id).filter(pk=application_id).exists():
        raise ApplicationDeleted


def _check_url(url: str) -> None:
    try:
        validate_webhook_url(url, allow_private=settings.WEBHOOK_ALLOW_PRIVATE_TARGETS)
    except UnsafeWebhookUrl as exc:
        raise InvalidInput({"url": [str(exc)]}) from None
