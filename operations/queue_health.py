"""The figures of the admin's "Queue health" page: both queues as `queue_status` reports
them, and the delivery log's last 24 hours by hour and outcome. Every figure group is one
bounded aggregate in the database; nothing is loaded row by row."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db.models import Count
from django.db.models.functions import TruncHour

from jobs.stats import job_queue_stats
from notifications.models import Delivery, DeliveryOutcome
from notifications.stats import endpoint_circuit_stats, notification_queue_stats

HOURS = 24


@dataclass(frozen=True)
class HourlyOutcomes:
    """Deliveries per hour (oldest first, the current hour last) and outcome."""

    hours: list[datetime]
    counts: list[dict[str, int]]

    def totals(self) -> dict[str, int]:
        return {
            outcome: sum(hour.get(outcome, 0) for hour in self.counts)
            for outcome in DeliveryOutcome.values
        }


@dataclass(frozen=True)
class QueueHealth:
    notifications: dict[str, int]
    jobs: dict[str, int]
    deliveries: HourlyOutcomes


def queue_health(*, now: datetime) -> QueueHealth:
    return QueueHealth(
        notifications={
            **notification_queue_stats(now=now),
            **endpoint_circuit_stats(now=now),
        },
        jobs=job_queue_stats(now=now),
        deliveries=hourly_outcomes(now=now),
    )


def hourly_outcomes(*, now: datetime) -> HourlyOutcomes:
    """The last HOURS whole UTC hours up to and including the current one, in one GROUP BY
    over the attempted_at index; hours without deliveries are zeros."""
    current = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    hours = [current - timedelta(hours=back) for back in range(HOURS - 1, -1, -1)]
    rows = (
        Delivery.objects.filter(attempted_at__gte=hours[0])
        .annotate(hour=TruncHour("attempted_at", tzinfo=UTC))
        .values("hour", "outcome")
        .annotate(count=Count("pk"))
        .order_by()
    )
    by_hour: dict[datetime, dict[str, int]] = {hour: {} for hour in hours}
    for row in rows:
        column = by_hour.get(row["hour"].astimezone(UTC))
        if column is not None:
            column[row["outcome"]] = row["count"]
    return HourlyOutcomes(hours=hours, counts=[by_hour[hour] for hour in hours])
