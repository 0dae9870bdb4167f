"""Plain factory functions for notifications, endpoints and tenants (importable by any test)."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from delivery.models import Notification, NotificationState, WebhookEndpoint, default_max_attempts
from delivery.transports.signing import generate_secret
from tenancy.models import Tenant


def make_tenant(name: str = "Tenant") -> Tenant:
    return Tenant.objects.create(name=name)


def make_endpoint(
    *,
    tenant: Tenant,
    url: str,
    enabled: bool = True,
    secret: str | None = None,
    event_types: list[str] | None = None,
    application_id: UUID | None = None,
) -> WebhookEndpoint:
    return WebhookEndpoint.objects.create(
        tenant=tenant,
        application_id=application_id,
        url=url,
        enabled=enabled,
        secret=secret or generate_secret(),
        event_types=event_types,
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
    """Field values of a notification (unsaved), for create() or bulk_create(). Without a
    `state`, the one its columns describe (`state_of`)."""
    fields.setdefault(
        "state",
        state_of(
            next_fire_at=next_fire_at,
            error_count=fields.get("error_count", 0),
            dead_letter_reason=fields.get("dead_letter_reason", ""),
            max_attempts=fields.get("max_attempts") or default_max_attempts(),
        ),
    )
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


def state_of(
    *, next_fire_at: datetime | None, error_count: int, dead_letter_reason: str, max_attempts: int
) -> NotificationState:
    """The state a row with these columns is in, by migration 0010's rule: off the schedule
    with a reason, dead-lettered; without one, or at its attempt limit, parked; with
    failures, backing off; else scheduled. (A completed row is asked for by its state.)"""
    if next_fire_at is None:
        return NotificationState.DEAD_LETTERED if dead_letter_reason else NotificationState.PARKED
    if error_count >= max_attempts:
        return NotificationState.PARKED
    return NotificationState.BACKING_OFF if error_count else NotificationState.SCHEDULED


def make_notification(**kwargs: Any) -> Notification:
    """A saved notification; see notification_fields for the arguments."""
    return Notification.objects.create(**notification_fields(**kwargs))


def make_notifications(count: int, **kwargs: Any) -> list[Notification]:
    """`count` saved notifications sharing the same fields, in one INSERT."""
    return Notification.objects.bulk_create(
        [Notification(**notification_fields(**kwargs)) for _ in range(count)]
    )
