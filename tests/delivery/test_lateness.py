"""due_rows_left: what a tick that stopped early leaves due, by the queue's own definition."""

from datetime import UTC, datetime, timedelta

from delivery.scheduler.context import due_rows_left
from tests.delivery.factories import make_notifications

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


def test_counts_due_rows_only(tenant, settings):
    settings.NOTIFICATION_MAX_ATTEMPTS = 3
    make_notifications(3, tenant=tenant, next_fire_at=NOW - timedelta(minutes=2))
    make_notifications(1, tenant=tenant, next_fire_at=NOW)
    make_notifications(2, tenant=tenant, next_fire_at=NOW + timedelta(seconds=1))  # future
    make_notifications(1, tenant=tenant, next_fire_at=None)  # parked
    make_notifications(1, tenant=tenant, next_fire_at=NOW, error_count=3)  # exhausted
    make_notifications(
        2, tenant=tenant, next_fire_at=NOW, claimed_until=NOW + timedelta(seconds=30)
    )  # in flight

    assert due_rows_left(now=NOW) == 4


def test_nothing_due_is_zero(tenant):
    assert due_rows_left(now=NOW) == 0
