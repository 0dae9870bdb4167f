"""Producers' announcements: how another app (e.g. a project's provisioning) tells a tenant
something, as one-shot notifications created through the same checks as the API's."""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from notifications.models import Channel, Notification, NotificationSource, WebhookEndpoint
from notifications.states import Move, after
from notifications.validation import recipient_errors
from web.errors import InvalidInput

SUBJECT_MAX = Notification._meta.get_field("subject").max_length


@dataclass(frozen=True)
class Announcement:
    """What a producer (e.g. a project's provisioning) tells a tenant: an email to
    `addresses` and a webhook `event` ({"type", "data"}) to each enabled endpoint."""

    addresses: Sequence[str]
    email_subject: str
    email_body: str
    event: dict[str, Any]
    event_subject: str


@dataclass(frozen=True)
class Announced:
    """One producer's announcement to one tenant, keyed by `source_key` (about a project,
    or about none: a webhook endpoint's retirement)."""

    tenant_id: UUID
    project_id: UUID | None
    source_key: str
    announcement: Announcement


def notifications_announce(items: Sequence[Announced], *, now: datetime) -> None:
    """Create the one-shot notifications of each announcement, due now: one read of the
    tenants' enabled endpoints and one insert, whatever their number.

    Each row's source key extends its item's `source_key` (`…:invite:<address digest>`,
    `…:event:<endpoint id>`), so a producer that runs twice creates nothing the second
    time. Addresses are checked as the API checks them: an invalid one raises InvalidInput
    and creates nothing."""
    for item in items:
        addresses = list(item.announcement.addresses)
        errors = recipient_errors([Channel.EMAIL], addresses)
        if addresses and errors:
            raise InvalidInput(errors)
    endpoints: dict[UUID, list[UUID]] = {}
    enabled = WebhookEndpoint.objects.filter(
        tenant_id__in={item.tenant_id for item in items}, enabled=True
    )
    for tenant_id, endpoint_id in enabled.values_list("tenant_id", "id"):
        endpoints.setdefault(tenant_id, []).append(endpoint_id)
    rows = [
        row
        for item in items
        for row in _announcement_rows(item, endpoints.get(item.tenant_id, []), now=now)
    ]
    Notification.objects.bulk_create(rows, ignore_conflicts=True)


def _announcement_rows(
    item: Announced, endpoint_ids: list[UUID], *, now: datetime
) -> list[Notification]:
    announcement, source_key = item.announcement, item.source_key
    common = {
        "tenant_id": item.tenant_id,
        "project_id": item.project_id,
        "next_fire_at": now,
        "due_at": now,
        "recurrence_anchor": now,
        "occurrence": 1,
        "state": after(None, Move.CREATE),
        "timezone": "UTC",
        "source": NotificationSource.SYSTEM,
        "created_at": now,
        "updated_at": now,
    }
    emails = [
        Notification(
            channels=[Channel.EMAIL],
            email_to=[address],
            subject=announcement.email_subject[:SUBJECT_MAX],
            body=announcement.email_body,
            source_key=f"{source_key}:invite:{_digest(address)}",
            **common,
        )
        for address in announcement.addresses
    ]
    events = [
        Notification(
            channels=[Channel.WEBHOOK],
            webhook_endpoint_id=endpoint_id,
            webhook_event=announcement.event,
            subject=announcement.event_subject[:SUBJECT_MAX],
            source_key=f"{source_key}:event:{endpoint_id}",
            **common,
        )
        for endpoint_id in endpoint_ids
    ]
    return emails + events


def _digest(address: str) -> str:
    # Keeps the key short and keeps the address itself out of an identifier.
    return hashlib.sha256(address.lower().encode()).hexdigest()[:32]
