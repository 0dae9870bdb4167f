"""An endpoint that accepts the connection and never answers: the tick still ends within the
channel timeout plus a margin (its own run, as it reports it: a busy machine may take longer
than that to start the process), and the row is recorded as a timed-out failure,
backing off, not lost."""

import pytest
from django.utils import timezone

from delivery.models import Delivery, DeliveryOutcome, NotificationState
from tests.conftest import requires_postgres
from tests.delivery.factories import make_endpoint, make_notification, make_tenant
from tests.support.http_server import silent_server

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True), pytest.mark.fault]

CHANNEL_TIMEOUT = 2
# The claim and the write-back fit well within it on a busy machine.
MARGIN = 6
ENV = {"CHANNEL_TIMEOUT_SECONDS": str(CHANNEL_TIMEOUT), "CLAIM_LEASE_SECONDS": "7"}


def test_a_tick_against_an_endpoint_that_never_answers_ends_on_the_channel_timeout(workers, report):
    tenant = make_tenant()
    with silent_server() as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        row = make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=timezone.now())
        tick = workers("run_tick", app="fault_silent", env=ENV).finish(timeout=CHANNEL_TIMEOUT + 30)
        accepted = server.accepted

    summary = tick.summary()
    report(
        "silent_endpoint",
        channel_timeout=CHANNEL_TIMEOUT,
        connections=accepted,
        tick_duration_s=summary["duration_s"],
        process_seconds=tick.seconds,
        bound=CHANNEL_TIMEOUT + MARGIN,
    )
    assert tick.returncode == 0, tick.stderr
    assert accepted == 1
    assert summary["duration_s"] < CHANNEL_TIMEOUT + MARGIN
    assert summary["duration_s"] >= CHANNEL_TIMEOUT  # it did wait for the answer
    assert (summary["claimed"], summary["backed_off"], summary["errors"]) == (1, 1, 0)
    row.refresh_from_db()
    assert row.state == NotificationState.BACKING_OFF
    assert row.error_count == 1
    assert row.next_fire_at > timezone.now()
    assert row.claimed_until is None
    log = Delivery.objects.get(notification_id=row.pk)
    assert (log.outcome, log.error_category) == (DeliveryOutcome.TIMEOUT, "timeout")
