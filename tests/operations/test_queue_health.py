"""The Queue health figures: queue_status's numbers and the delivery log's last 24 hours,
one bounded aggregate per figure group."""

from datetime import UTC, datetime, timedelta

import pytest

from notifications.models import Delivery, DeliveryOutcome
from operations.queue_health import HOURS, hourly_outcomes, queue_health
from tests.jobs.factories import make_job
from tests.notifications.factories import make_tenant

NOW = datetime(2026, 3, 2, 9, 40, tzinfo=UTC)


@pytest.fixture
def tenant(db):
    return make_tenant("Acme")


def _delivery(tenant, outcome, attempted_at):
    return Delivery.objects.create(
        tenant=tenant,
        notification_id="00000000-0000-0000-0000-000000000001",
        occurrence=1,
        channel="webhook",
        outcome=outcome,
        attempted_at=attempted_at,
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
    make_job(tenant, status="failed", now=NOW)
    _delivery(tenant, "timeout", NOW - timedelta(minutes=1))

    # notifications: 4 (queue_status's own figures), jobs: 1, deliveries per hour: 1
    with django_assert_num_queries(7):
        health = queue_health(now=NOW)

    assert health.jobs["failed"] == 1
    assert health.notifications["dead_lettered"] == 0
    assert health.deliveries.totals()["timeout"] == 1
