"""Rows that crash their worker: claimed again and again without any outcome (the worker
dies on them each time) are dead-lettered as crashed on the next claim instead of being
delivered again."""

from datetime import UTC, datetime, timedelta

import pytest

from delivery.models import Delivery, DeliveryOutcome, NotificationState
from delivery.scheduler.tick import notification_claim, run_tick
from tests.delivery.factories import make_endpoint, make_notification, make_tenant
from tests.support.http_server import recording_server

pytestmark = pytest.mark.usefixtures("local_channels")

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
LEASE = timedelta(seconds=45)


def crash_repeatedly(times: int) -> datetime:
    """Claim `times` times without writing back, each after the previous lease ran out;
    returns a moment after the last lease."""
    moment = NOW
    for _ in range(times):
        assert len(notification_claim(now=moment, lease=LEASE, limit=10)) == 1
        moment += LEASE + timedelta(seconds=1)
    return moment


def test_row_that_crashed_every_claim_is_dead_lettered_without_delivery(db, settings):
    tenant = make_tenant()
    with recording_server() as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        row = make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=NOW)
        later = crash_repeatedly(settings.NOTIFICATION_MAX_ATTEMPTS)

        summary = run_tick(now=later)
        again = run_tick(now=later + timedelta(days=1))

        assert server.received() == []
    assert (summary.claimed, summary.dead_lettered) == (1, 1)
    assert again.claimed == 0
    row.refresh_from_db()
    assert row.state == NotificationState.DEAD_LETTERED
    assert (row.dead_letter_reason, row.unfinished_claims, row.claimed_until) == (
        "crashed",
        0,
        None,
    )
    log = Delivery.objects.get(notification_id=row.pk)
    assert (log.outcome, log.error_category) == (DeliveryOutcome.DEAD_LETTERED, "crashed")


def test_fewer_crashes_than_max_attempts_still_deliver(db, settings):
    tenant = make_tenant()
    with recording_server() as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=NOW)
        later = crash_repeatedly(settings.NOTIFICATION_MAX_ATTEMPTS - 1)

        summary = run_tick(now=later)

        assert len(server.received()) == 1
    assert summary.delivered == 1


def test_recurring_crashed_row_skips_to_its_next_occurrence(db, settings):
    tenant = make_tenant()
    row = make_notification(tenant=tenant, next_fire_at=NOW, rrule="FREQ=DAILY")
    later = crash_repeatedly(settings.NOTIFICATION_MAX_ATTEMPTS)

    run_tick(now=later)

    row.refresh_from_db()
    assert (row.occurrence, row.dead_letter_reason, row.error_count) == (2, "", 0)
    assert row.next_fire_at == NOW + timedelta(days=1)
    assert row.last_error.startswith("crashed")
    assert Delivery.objects.get(notification_id=row.pk).occurrence == 1
