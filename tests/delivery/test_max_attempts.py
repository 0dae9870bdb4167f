"""Each row keeps the attempt limit it was created with: changing MAX_ATTEMPTS affects new
rows only, and the due query, the claim and the dead-letter rule read the row's own."""

from datetime import UTC, datetime, timedelta

import pytest

from delivery.models import Notification
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import notification_claim, run_tick
from delivery.transports.base import DeliveryResult
from notifications import services
from tests.delivery.factories import make_endpoint, make_notification, make_tenant

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
LEASE = timedelta(seconds=45)


def failed(message, *, timeout):
    return DeliveryResult(ok=False, category="http_5xx", http_status=500)


@pytest.fixture
def tenant(db):
    return make_tenant()


def test_a_new_row_copies_the_setting(tenant, settings):
    settings.NOTIFICATION_MAX_ATTEMPTS = 7
    created = services.notification_create(
        tenant=tenant, channels=["email"], email_to=["a@example.com"], subject="S", now=NOW
    )
    assert Notification.objects.get(pk=created.pk).max_attempts == 7


def test_lowering_the_setting_reclassifies_no_existing_row(tenant, settings):
    settings.NOTIFICATION_MAX_ATTEMPTS = 5
    endpoint = make_endpoint(tenant=tenant, url="http://127.0.0.1:9/unused")
    row = make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=NOW, error_count=3)
    settings.NOTIFICATION_MAX_ATTEMPTS = 2

    assert [r.pk for r in Notification.objects.due(now=NOW)] == [row.pk]
    assert Notification.objects.in_state("backing_off").get().pk == row.pk
    summary = run_tick(now=NOW, senders=Senders(email=failed, webhook=failed))

    row.refresh_from_db()
    assert (summary.backed_off, summary.dead_lettered) == (1, 0)
    assert (row.state, row.error_count, row.max_attempts) == ("backing_off", 4, 5)


def test_a_row_at_its_own_limit_is_not_due_whatever_the_setting(tenant, settings):
    make_notification(
        tenant=tenant, next_fire_at=NOW, error_count=2, max_attempts=2, state="backing_off"
    )
    settings.NOTIFICATION_MAX_ATTEMPTS = 10

    assert notification_claim(now=NOW, lease=LEASE, limit=5) == []


def test_the_crashed_check_reads_the_rows_own_limit(tenant, settings):
    settings.NOTIFICATION_MAX_ATTEMPTS = 10
    row = make_notification(tenant=tenant, next_fire_at=NOW, max_attempts=2, unfinished_claims=2)

    summary = run_tick(now=NOW, senders=Senders(email=failed, webhook=failed))

    row.refresh_from_db()
    assert summary.dead_lettered == 1
    assert (row.state, row.dead_letter_reason) == ("dead_lettered", "crashed")
