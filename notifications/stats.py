"""Queue figures of the notification scheduler for `queue_status` (read-only)."""

from datetime import datetime

from django.db.models import Count, Min, Q

from notifications.models import Notification, WebhookEndpoint


def notification_queue_stats(*, now: datetime) -> dict[str, int]:
    """{due, oldest_due_age_seconds, backing_off, dead_lettered, in_flight}, with the
    queue's own definitions (NotificationQuerySet). The oldest due age is how late the
    most overdue claimable row is, in whole seconds; 0 when nothing is due."""
    rows = Notification.objects
    due = rows.due(now=now).aggregate(count=Count("pk"), oldest=Min("next_fire_at"))
    lateness = 0 if due["oldest"] is None else (now - due["oldest"]).total_seconds()
    return {
        "due": due["count"],
        "oldest_due_age_seconds": max(0, int(lateness)),
        "backing_off": rows.backing_off().count(),
        "dead_lettered": rows.dead_lettered().count(),
        "in_flight": rows.in_flight(now=now).count(),
    }


def endpoint_circuit_stats(*, now: datetime) -> dict[str, int]:
    """{open_circuits, failing_endpoints}: webhook endpoints whose deliveries are deferred
    right now, and those with transport failures whose circuit is not open (yet)."""
    return WebhookEndpoint.objects.aggregate(
        open_circuits=Count("pk", filter=Q(circuit_open_until__gt=now)),
        failing_endpoints=Count(
            "pk",
            filter=Q(consecutive_failures__gt=0)
            & (Q(circuit_open_until__isnull=True) | Q(circuit_open_until__lte=now)),
        ),
    )
