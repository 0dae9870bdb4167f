"""The figures of the admin's "Queue health" page: both queues as `queue_status` reports
them, and the delivery log's last 24 hours by hour and outcome. Every figure group is one
bounded aggregate in the database; nothing is loaded row by row."""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Count, Q
from django.db.models.functions import TruncHour

from delivery.models import Delivery, DeliveryOutcome
from delivery.scheduler.context import LATENESS_BOUNDS_S
from delivery.stats import endpoint_circuit_stats, notification_queue_stats
from jobs.stats import job_queue_stats
from tenancy.quotas import LimitUse, tenants_near_limits
from webhooks.stats import message_stats

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
class HourlyLateness:
    """Per hour (as in HourlyOutcomes): p50 and p99 lateness of the attempts, in seconds
    (the upper bound of the band each falls in), None for an hour without attempts."""

    hours: list[datetime]
    quantiles: list[dict[str, float | None]]


@dataclass(frozen=True)
class QueueHealth:
    notifications: dict[str, int]
    jobs: dict[str, int]
    deliveries: HourlyOutcomes
    lateness: HourlyLateness
    # Tenants at 80% or more of a limit of their plan, the fullest first (at most NEAR_SHOWN).
    near_limits: list[LimitUse]


NEAR_SHOWN = 50


def queue_health(*, now: datetime) -> QueueHealth:
    return QueueHealth(
        notifications={
            **notification_queue_stats(now=now),
            **endpoint_circuit_stats(now=now),
            **message_stats(now=now),
        },
        jobs=job_queue_stats(now=now),
        deliveries=hourly_outcomes(now=now),
        lateness=hourly_lateness(now=now),
        near_limits=tenants_near_limits(now=now)[:NEAR_SHOWN],
    )


def _hours(now: datetime) -> list[datetime]:
    current = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return [current - timedelta(hours=back) for back in range(HOURS - 1, -1, -1)]


def hourly_outcomes(*, now: datetime) -> HourlyOutcomes:
    """The last HOURS whole UTC hours up to and including the current one, in one GROUP BY
    over the attempted_at index; hours without deliveries are zeros."""
    hours = _hours(now)
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


def hourly_lateness(*, now: datetime) -> HourlyLateness:
    """p50/p99 lateness per hour of the last HOURS hours from the delivery log's `late_ms`,
    in one GROUP BY that counts each hour's attempts per band (both databases)."""
    hours = _hours(now)
    bands = {
        _band(bound): Count("pk", filter=Q(late_ms__lte=bound * 1000))
        for bound in LATENESS_BOUNDS_S
    }
    rows = (
        Delivery.objects.filter(attempted_at__gte=hours[0], late_ms__isnull=False)
        .annotate(hour=TruncHour("attempted_at", tzinfo=UTC))
        .values("hour")
        .annotate(total=Count("pk"), **bands)
        .order_by()
    )
    by_hour: dict[datetime, dict[str, float | None]] = {
        hour: {"p50": None, "p99": None} for hour in hours
    }
    for row in rows:
        hour = row["hour"].astimezone(UTC)
        if hour in by_hour:
            by_hour[hour] = {q: _band_quantile(row, share) for q, share in QUANTILES.items()}
    return HourlyLateness(hours=hours, quantiles=[by_hour[hour] for hour in hours])


QUANTILES = {"p50": 0.5, "p99": 0.99}


def _band(bound: float) -> str:
    return f"le_{bound:g}"


def _band_quantile(row: Mapping[str, Any], share: float) -> float:
    """The upper bound of the band the quantile falls in; past the last band, the last
    band (as Prometheus' histogram_quantile reads the +Inf bucket)."""
    wanted = share * row["total"]
    for bound in LATENESS_BOUNDS_S:
        if row[_band(bound)] >= wanted:
            return bound
    return LATENESS_BOUNDS_S[-1]
