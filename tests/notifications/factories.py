"""Plain factory functions for notifications, endpoints and tenants (importable by any test)."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from notifications.models import Notification, WebhookEndpoint
from notifications.transports.signing import generate_secret
from tenancy.models import Tenant


def make_tenant(name: str = "Tenant") -> Tenant:
    return Tenant.objects.create(name=name)


def make_endpoint(
    *, tenant: Tenant, url: str, enabled: bool = True, secret: str | None = None
) -> WebhookEndpoint:
    return WebhookEndpoint.objects.create(
        tenant=tenant, url=url, enabled=enabled, secret=secret or generate_secret()
    )


def notification_fields(
    *,
    tenant: Tenant,
    next_fire_at: datetime | None,
    channels: Sequence[str] = ("webhook",),
    endpoint: WebhookEndpoint | None = None,
    email_to: Sequence[str] = (),
    rrule: str = "",
    **fields: Any,
) -> dict[str, Any]:
    """Field values of a notification (unsaved), for create() or bulk_create()."""
    return {
        "tenant": tenant,
        "channels": list(channels),
        "webhook_endpoint": endpoint,
        "email_to": list(email_to),
        "subject": "Standup",
        "body": "Daily standup in 5 minutes",
        "rrule": rrule,
        "recurrence_anchor": next_fire_at,
        "next_fire_at": next_fire_at,
        "due_at": next_fire_at,
        **fields,
    }


def make_notification(**kwargs: Any) -> Notification:
    """A saved notification; see notification_fields for the arguments."""
    return Notification.objects.create(**notification_fields(**kwargs))


def make_notifications(count: int, **kwargs: Any) -> list[Notification]:
    """`count` saved notifications sharing the same fields, in one INSERT."""
    return Notification.objects.bulk_create(
        [Notification(**notification_fields(**kwargs)) for _ in range(count)]
    )
