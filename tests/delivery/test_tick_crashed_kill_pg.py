"""A row that crashes its worker, for real: the tick process is killed (SIGKILL) while
delivering the row, MAX_ATTEMPTS times; the next tick dead-letters it as crashed instead of
delivering it again.

Lease expiry is simulated by moving `claimed_until`, and the lease of the endpoint's slots
the killed tick held, into the past after each kill, which is what the passing of
CLAIM_LEASE_SECONDS does."""

import subprocess
import sys
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from dbqueue.models import ConcurrencySlot
from delivery.models import Delivery, DeliveryOutcome, Notification, NotificationState
from tests.conftest import requires_postgres
from tests.delivery.factories import make_endpoint, make_notification, make_tenant
from tests.support.http_server import Reply, recording_server
from tests.support.processes import ROOT, subprocess_env, wait_until

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True)]


def start_tick() -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", "run_tick"],
        cwd=ROOT,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_row_that_kills_its_worker_every_time_is_dead_lettered_as_crashed():
    tenant = make_tenant()
    with recording_server(lambda request: Reply(200, delay=30)) as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        row = make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=timezone.now())
        for attempt in range(1, settings.NOTIFICATION_MAX_ATTEMPTS + 1):
            tick = start_tick()
            wait_until(lambda n=attempt: len(server.received()) == n, timeout=30)
            tick.kill()
            tick.communicate(timeout=10)
            Notification.objects.filter(pk=row.pk).update(
                claimed_until=timezone.now() - timedelta(seconds=1)
            )
            ConcurrencySlot.objects.update(held_until_us=0)

        last = start_tick()
        stdout, stderr = last.communicate(timeout=60)

    assert last.returncode == 0, stderr
    assert "dead_lettered=1" in stdout
    assert len(server.received()) == settings.NOTIFICATION_MAX_ATTEMPTS  # never delivered again
    row.refresh_from_db()
    assert row.state == NotificationState.DEAD_LETTERED
    assert row.dead_letter_reason == "crashed"
    assert row.next_fire_at is None
    log = Delivery.objects.get(notification_id=row.pk)
    assert (log.outcome, log.error_category) == (DeliveryOutcome.DEAD_LETTERED, "crashed")
