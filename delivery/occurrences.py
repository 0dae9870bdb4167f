"""What identifies an occurrence of a queued send, and what its webhook says, built from the
row alone so that every attempt of an occurrence sends the same bytes.

Imports nothing of Django: the transports that build a row's message import it, and the
webhook transport runs in the tick's sending process too, which starts without Django.
"""

from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from delivery.models import Notification


def message_webhook_id(message_id: Any) -> str:
    """The webhook-id every delivery of a message carries, on every attempt."""
    return f"msg_{message_id}"


def occurrence_id(notification: "Notification") -> str:
    """The occurrence's stable identity: webhook-id and email idempotency key. A message's
    delivery carries the message's id instead, the same for every endpoint and resend."""
    if notification.message_id is not None:
        return message_webhook_id(notification.message_id)
    return f"notification_{notification.id}_{notification.occurrence}"


def iso_utc(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def due_time(notification: "Notification") -> datetime | None:
    """When the row's current occurrence was due: the same on every attempt of it (a
    backoff or a deferral moves next_fire_at, never this). A row written by a process of
    an older release (during a rolling deploy) has no due_at; its next_fire_at is the best
    guess."""
    return notification.due_at or notification.next_fire_at


def has_webhook_data(notification: "Notification") -> bool:
    """Whether the row's webhook body can be built: a message's delivery needs the
    message's payload, loaded for the attempt (`webhook_data`) unless the row holds it."""
    if notification.message_id is None:
        return True
    stored = notification.webhook_event or {}
    return "data" in stored or notification.webhook_data is not None


def webhook_payload(notification: "Notification") -> dict[str, Any]:
    """The custom event a producer set, or the standard notification.fired event. Built
    from the occurrence alone (its `timestamp` is the occurrence's due time, or the
    message's creation for a message's delivery; its data the message's payload, loaded
    for the attempt, or what the row holds), so every attempt of an occurrence sends the
    same bytes; only the signature headers change."""
    due = due_time(notification)
    timestamp = iso_utc(due) if due else None
    custom = notification.webhook_event
    if custom:
        return {
            "type": custom.get("type"),
            "timestamp": custom.get("timestamp", timestamp),
            "data": custom.get("data", notification.webhook_data),
        }
    return {
        "type": "notification.fired",
        "timestamp": timestamp,
        "data": {
            "notification_id": str(notification.id),
            "tenant_id": str(notification.tenant_id),
            "project_id": str(notification.project_id) if notification.project_id else None,
            "occurrence": notification.occurrence,
            "subject": notification.subject,
            "body": notification.body,
            "scheduled_for": timestamp,
        },
    }
