"""WEBHOOK_ENDPOINT_CONCURRENCY holds across processes: four tick processes at once over one
slow endpoint never have more deliveries in flight to it than the limit, counted at the
receiving server; every row is still delivered exactly once."""

import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from dbqueue.models import ConcurrencySlot
from delivery.models import Delivery
from tests.conftest import requires_postgres
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant
from tests.support.http_server import RecordedRequest, Reply, recording_server

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True), pytest.mark.fault]

ROWS = 40
PROCESSES = 4
LIMIT = 2
SLOW = 0.25  # seconds the receiver takes for each request
ENV = {"WEBHOOK_ENDPOINT_CONCURRENCY": str(LIMIT), "TICK_TIME_BUDGET_SECONDS": "120"}


class InFlight:
    """The receiver's count of requests it is answering at once, and the most it saw."""

    def __init__(self) -> None:
        self.now = self.peak = 0
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(SLOW)
        with self._lock:
            self.now -= 1
        return Reply(200)


def test_four_ticks_never_have_more_than_the_limit_in_flight_to_one_endpoint(workers, report):
    tenant = make_tenant()
    in_flight = InFlight()
    with recording_server(in_flight) as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        rows = make_notifications(
            ROWS, tenant=tenant, endpoint=endpoint, next_fire_at=timezone.now() - timedelta(1)
        )
        started = time.monotonic()
        ticks = [workers("run_tick", app=f"slots_{n}", env=ENV) for n in range(PROCESSES)]
        results = [tick.finish(timeout=120) for tick in ticks]
        seconds = time.monotonic() - started
        by_the_four = len(server.received())
        # The ticks that found the endpoint's slots taken left its rows due; as cron would,
        # one more tick takes what the holder's last claim missed.
        results.append(workers("run_tick", app="slots_next", env=ENV).finish(timeout=120))
        received = Counter(request.headers["webhook-id"] for request in server.received())

    assert [r.returncode for r in results] == [0] * (PROCESSES + 1), [r.stderr for r in results]
    summaries = [r.summary() for r in results]
    report(
        "endpoint_slots",
        rows=ROWS,
        processes=PROCESSES,
        limit=LIMIT,
        peak_in_flight=in_flight.peak,
        delivered="+".join(str(s["delivered"]) for s in summaries),
        released="+".join(str(s["released"]) for s in summaries),
        left_by_the_four=ROWS - by_the_four,
        seconds=seconds,
    )
    assert 1 <= in_flight.peak <= LIMIT
    assert received.keys() == {f"notification_{row.pk}_1" for row in rows}
    assert max(received.values()) == 1
    assert Delivery.objects.filter(outcome="delivered").count() == ROWS
    assert sum(s["fenced_out"] + s["errors"] for s in summaries) == 0
    # Every tick freed the slots it took when it ended.
    assert not ConcurrencySlot.objects.exclude(holder="").exists()
