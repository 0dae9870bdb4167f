"""Queue figures of the notification scheduler for `queue_status` (read-only)."""

from datetime import datetime

from django.db.models import Count, Min, Q

from delivery.circuits import circuit_open
from delivery.models import Notification, NotificationState, WebhookEndpoint


def notification_queue_stats(*, now: datetime) -> dict[str, int]:
    """{due, oldest_due_age_seconds, backing_off, oldest_backing_off_age_seconds,
    dead_lettered, in_flight}, with the queue's own definitions (NotificationQuerySet and
    the stored state: completed and parked rows are in none of them).

    Two states have an age, in whole seconds, 0 when the state is empty: `due`, how long
    the most overdue claimable row has waited for a tick (since its next_fire_at: the
    scheduler's own delay), and `backing_off`, how long the oldest occurrence being
    retried has been outstanding (since its due_at, when it was first due). Dead-lettered
    and in-flight rows wait for nobody's tick, so they have none."""
    rows = Notification.objects
    due = rows.due(now=now).aggregate(count=Count("pk"), oldest=Min("next_fire_at"))
    backing_off = rows.in_state(NotificationState.BACKING_OFF).aggregate(
        count=Count("pk"), oldest=Min("due_at")
    )
    return {
        "due": due["count"],
        "oldest_due_age_seconds": _age(due["oldest"], now=now),
        "backing_off": backing_off["count"],
        "oldest_backing_off_age_seconds": _age(backing_off["oldest"], now=now),
        "dead_lettered": rows.in_state(NotificationState.DEAD_LETTERED).count(),
        "in_flight": rows.in_flight(now=now).count(),
    }


def endpoint_circuit_stats(*, now: datetime) -> dict[str, int]:
    """{open_circuits, failing_endpoints, disabled_endpoints}: webhook endpoints whose
    deliveries are deferred right now, those whose deliveries since the last success all
    failed (a 4xx included) whose circuit is not open (yet), and those switched off
    (retired as failing, by hand, or after a 410)."""
    return WebhookEndpoint.objects.aggregate(
        open_circuits=Count("pk", filter=circuit_open(now=now)),
        failing_endpoints=Count(
            "pk",
            filter=(Q(consecutive_failures__gt=0) | Q(failed_deliveries__gt=0))
            & ~circuit_open(now=now),
        ),
        disabled_endpoints=Count("pk", filter=Q(enabled=False)),
    )


def _age(since: datetime | None, *, now: datetime) -> int:
    return 0 if since is None else max(0, int((now - since).total_seconds()))
