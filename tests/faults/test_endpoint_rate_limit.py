"""An endpoint's rate limit holds across tick processes: two `run_tick --loop` processes
deliver a burst to one endpoint limited to RATE deliveries per second, and no one-second
window of the delivery log holds more than RATE of its attempts (one more at most where an
attempt was stamped a moment after the slot it took)."""

from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.models import Delivery
from tests.conftest import requires_postgres
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant
from tests.faults.workers import wait_until
from tests.support.http_server import Reply, recording_server

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True), pytest.mark.fault]

RATE = 4
ROWS = 6 * RATE


def test_two_ticks_together_keep_to_the_endpoints_rate_limit(workers, report):
    tenant = make_tenant()
    with recording_server(lambda request: Reply(200)) as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        endpoint.rate_limit = RATE
        endpoint.save()
        rows = make_notifications(
            ROWS, tenant=tenant, endpoint=endpoint, next_fire_at=timezone.now() - timedelta(1)
        )
        ticks = [
            workers("run_tick", "--loop", "--interval", "0.2", app=f"rate_{name}")
            for name in ("a", "b")
        ]
        delivered = Delivery.objects.filter(outcome="delivered")
        wait_until(lambda: delivered.count() == ROWS, timeout=120)
        for tick in ticks:
            tick.kill()
        received = Counter(request.headers["webhook-id"] for request in server.received())

    attempts = sorted(delivered.values_list("attempted_at", flat=True))
    start = attempts[0]
    per_window = Counter(int((at - start).total_seconds()) for at in attempts)
    report("endpoint_rate_limit", rows=ROWS, rate=RATE, busiest_window=max(per_window.values()))
    assert received.keys() == {f"notification_{row.pk}_1" for row in rows}
    assert max(received.values()) == 1
    assert max(per_window.values()) <= RATE + 1
    # The rows waited in the ticks for the slots they reserved: no failure of any kind and
    # no deferral was logged (a deferral per waiting row and slot was the thrashing).
    assert not Delivery.objects.exclude(outcome="delivered").exists()
