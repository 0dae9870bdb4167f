"""Producers' announcements: how another app (e.g. a project's provisioning) tells a tenant
something, as one-shot notifications created through the same checks as the API's."""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from dbtools.fields import max_length
from delivery.models import Channel, Notification, NotificationSource
from delivery.outbox import one_shot_due
from notifications.validation import recipient_errors
from web.errors import InvalidInput
from webhooks.messages import Publish, messages_publish

SUBJECT_MAX = max_length(Notification, "subject")


@dataclass(frozen=True)
class Announcement:
    """What a producer (e.g. a project's provisioning) tells a tenant: an email to
    `addresses` and an `event` ({"type": one of the product's event types, "data"})
    published as a message to each enabled endpoint subscribed to it."""

    addresses: Sequence[str]
    email_subject: str
    email_body: str
    event: dict[str, Any]


@dataclass(frozen=True)
class Announced:
    """One producer's announcement to one tenant, keyed by `source_key` (about a project,
    or about none: a webhook endpoint's retirement)."""

    tenant_id: UUID
    project_id: UUID | None
    source_key: str
    announcement: Announcement


def notifications_announce(items: Sequence[Announced], *, now: datetime) -> None:
    """Create each announcement's e-mails, due now, and publish its event as a message
    (webhooks.messages: to every enabled endpoint subscribed to its type), in one
    insert of the e-mails and deliveries whatever their number.

    Each e-mail's source key extends its item's `source_key` (`…:invite:<address
    digest>`) and each event's id is `<source_key>:<type>`, so a producer that runs twice
    creates nothing the second time. Addresses are checked as the API checks them: an
    invalid one raises InvalidInput and creates nothing."""
    for item in items:
        addresses = list(item.announcement.addresses)
        errors = recipient_errors([Channel.EMAIL], addresses)
        if addresses and errors:
            raise InvalidInput(errors)
    emails = [email for item in items for email in _emails(item, now=now)]
    events = [
        Publish(
            tenant_id=item.tenant_id,
            event_type=item.announcement.event["type"],
            payload=item.announcement.event.get("data") or {},
            event_id=f"{item.source_key}:{item.announcement.event['type']}",
            project_id=item.project_id,
            source=NotificationSource.SYSTEM,
        )
        for item in items
    ]
    messages_publish(events, now=now, alongside=emails)


def _emails(item: Announced, *, now: datetime) -> list[Notification]:
    announcement, source_key = item.announcement, item.source_key
    return [
        one_shot_due(
            now,
            tenant_id=item.tenant_id,
            project_id=item.project_id,
            source=NotificationSource.SYSTEM,
            channels=[Channel.EMAIL],
            email_to=[address],
            subject=announcement.email_subject[:SUBJECT_MAX],
            body=announcement.email_body,
            source_key=f"{source_key}:invite:{_digest(address)}",
        )
        for address in announcement.addresses
    ]


def _digest(address: str) -> str:
    # Keeps the key short and keeps the address itself out of an identifier.
    return hashlib.sha256(address.lower().encode()).hexdigest()[:32]
