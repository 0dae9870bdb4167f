"""The Queue health figures: queue_status's numbers and the delivery log's last 24 hours,
one bounded aggregate per figure group."""

from datetime import UTC, datetime, timedelta

import pytest

from delivery.models import Delivery, DeliveryOutcome
from delivery.scheduler.context import LATENESS_BOUNDS_S
from operations.queue_health import HOURS, hourly_lateness, hourly_outcomes, queue_health
from tests.delivery.factories import make_tenant
from tests.jobs.factories import make_job

NOW = datetime(2026, 3, 2, 9, 40, tzinfo=UTC)


@pytest.fixture
def tenant(db):
    return make_tenant("Acme")


def _delivery(tenant, outcome, attempted_at, late_ms=None):
    return Delivery.objects.create(
        tenant=tenant,
        notification_id="00000000-0000-0000-0000-000000000001",
        occurrence=1,
        channel="webhook",
        outcome=outcome,
        attempted_at=attempted_at,
        late_ms=late_ms,
    )


def test_deliveries_are_counted_per_hour_and_outcome(tenant):
    _delivery(tenant, "delivered", NOW - timedelta(minutes=5))
    _delivery(tenant, "delivered", NOW - timedelta(minutes=39))
    _delivery(tenant, "failed", NOW - timedelta(minutes=41))
    _delivery(tenant, "dead_lettered", NOW - timedelta(hours=23, minutes=10))
    _delivery(tenant, "delivered", NOW - timedelta(hours=24))

    figures = hourly_outcomes(now=NOW)

    assert len(figures.hours) == len(figures.counts) == HOURS
    assert figures.hours[-1] == datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    assert figures.hours[0] == datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    assert figures.counts[-1] == {"delivered": 2}
    assert figures.counts[-2] == {"failed": 1}
    assert figures.counts[0] == {"dead_lettered": 1}
    totals = figures.totals()
    assert {k: v for k, v in totals.items() if v} == {
        "delivered": 2,
        "failed": 1,
        "dead_lettered": 1,
    }
    assert set(totals) == set(DeliveryOutcome.values)


def test_the_figures_take_one_query_per_group(tenant, django_assert_num_queries):
    make_job(tenant, status="dead_lettered", now=NOW)
    _delivery(tenant, "timeout", NOW - timedelta(minutes=1))

    # notifications: 4 (queue_status's own figures), messages: 2, jobs: 1, deliveries per
    # hour: 1, tenants near their limits: 1 (no plan exists)
    with django_assert_num_queries(11):
        health = queue_health(now=NOW)

    assert health.jobs["dead_lettered"] == 1
    assert health.notifications["dead_lettered"] == 0
    assert health.deliveries.totals()["timeout"] == 1


def test_lateness_quantiles_per_hour_read_the_band_they_fall_in(tenant):
    # This hour: 98 on time (< 1 s), one 40 s late, one 20 minutes late.
    for _ in range(98):
        _delivery(tenant, "delivered", NOW - timedelta(minutes=1), late_ms=300)
    _delivery(tenant, "delivered", NOW - timedelta(minutes=2), late_ms=40_000)
    _delivery(tenant, "failed", NOW - timedelta(minutes=3), late_ms=1_200_000)
    # Two hours ago: everything about 10 s late. Attempts without late_ms are not counted.
    _delivery(tenant, "delivered", NOW - timedelta(hours=2), late_ms=10_000)
    _delivery(tenant, "skipped", NOW - timedelta(hours=2))

    lateness = hourly_lateness(now=NOW)

    assert len(lateness.hours) == len(lateness.quantiles) == HOURS
    assert lateness.quantiles[-1] == {"p50": 1.0, "p99": 60.0}
    assert lateness.quantiles[-3] == {"p50": 15.0, "p99": 15.0}
    assert lateness.quantiles[-2] == {"p50": None, "p99": None}


def test_lateness_is_read_in_the_bands_of_the_metrics_histogram(tenant):
    # 700 s falls in the (600, 1800] band; past the last band reads as the last, like
    # Prometheus' histogram_quantile does with the +Inf bucket.
    _delivery(tenant, "delivered", NOW - timedelta(minutes=1), late_ms=700_000)
    _delivery(tenant, "delivered", NOW - timedelta(hours=1), late_ms=2 * 86_400_000)

    lateness = hourly_lateness(now=NOW)

    assert lateness.quantiles[-1] == {"p50": 1800.0, "p99": 1800.0}
    assert lateness.quantiles[-2] == {"p50": LATENESS_BOUNDS_S[-1], "p99": LATENESS_BOUNDS_S[-1]}


def test_messages_and_their_deliveries_are_counted(tenant):
    from tests.delivery.factories import make_endpoint
    from webhooks.event_types import event_type_create
    from webhooks.messages import publish_message

    make_endpoint(tenant=tenant, url="https://a.example.com/")
    make_endpoint(tenant=tenant, url="https://b.example.com/")
    event_type_create(tenant=tenant, name="order.shipped")
    publish_message(tenant=tenant, event_type="order.shipped", payload={}, now=NOW)
    publish_message(
        tenant=tenant, event_type="order.shipped", payload={}, now=NOW - timedelta(days=2)
    )

    figures = queue_health(now=NOW).notifications

    assert figures["messages_24h"] == 1
    assert figures["message_deliveries_pending"] == 4
    assert figures["message_deliveries_failed"] == 0
