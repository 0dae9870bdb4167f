"""Message figures for `queue_status` and /metrics (read-only)."""

from datetime import datetime, timedelta

from django.db.models import Count, Q

from delivery.models import Notification
from delivery.states import NotificationState
from webhooks.models import Message


def message_stats(*, now: datetime) -> dict[str, int]:
    """{messages_24h, message_deliveries_pending, message_deliveries_failed}: messages
    published in the last 24 hours, and message deliveries still to go (scheduled or
    backing off) or out of attempts, over the partial index of message deliveries."""
    deliveries = Notification.objects.filter(message__isnull=False).aggregate(
        pending=Count(
            "pk",
            filter=Q(state__in=[NotificationState.SCHEDULED, NotificationState.BACKING_OFF]),
        ),
        failed=Count("pk", filter=Q(state=NotificationState.DEAD_LETTERED)),
    )
    return {
        "messages_24h": Message.objects.filter(created_at__gte=now - timedelta(hours=24)).count(),
        "message_deliveries_pending": deliveries["pending"],
        "message_deliveries_failed": deliveries["failed"],
    }
