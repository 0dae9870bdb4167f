"""Four tick processes at once over 10,000 due rows of one endpoint, then the next tick as
cron would start it: each row is delivered exactly once (counted at the receiving server by
webhook-id), none is left behind, and the claims add up to the rows.

The endpoint's slots are shared (WEBHOOK_ENDPOINT_CONCURRENCY across processes), so the
tick that takes them delivers the burst while the others give back, unattempted, the rows
they claimed. A claim that comes back short because another tick held rows it ranked does
not end a tick; but a tick may still give rows back after the holder's last claim found
nothing due, and those wait for the next tick: the report prints how many the four left."""

import time
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.models import Delivery, Notification
from tests.conftest import requires_postgres
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant
from tests.support.http_server import recording_server

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True), pytest.mark.fault]

ROWS = 10_000
PROCESSES = 4
# A slow machine must not end a tick on its time budget with rows still due.
ENV = {"TICK_TIME_BUDGET_SECONDS": "600"}


def test_overlapping_ticks_deliver_every_row_exactly_once(workers, report):
    tenant = make_tenant()
    with recording_server() as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        rows = make_notifications(
            ROWS, tenant=tenant, endpoint=endpoint, next_fire_at=timezone.now() - timedelta(1)
        )
        started = time.monotonic()
        ticks = [
            workers("run_tick", "--limit", str(ROWS), app=f"fault_overlap_{n}", env=ENV)
            for n in range(PROCESSES)
        ]
        results = [tick.finish(timeout=600) for tick in ticks]
        seconds = time.monotonic() - started
        by_the_overlap = len(server.received())
        results.append(
            workers("run_tick", "--limit", str(ROWS), app="fault_overlap_next", env=ENV).finish(
                timeout=600
            )
        )
        received = Counter(request.headers["webhook-id"] for request in server.received())

    assert [r.returncode for r in results] == [0] * (PROCESSES + 1), [r.stderr for r in results]
    summaries = [r.summary() for r in results]
    expected = {f"notification_{row.pk}_1" for row in rows}
    duplicates = sum(count - 1 for count in received.values())
    lost = len(expected - received.keys())
    report(
        "overlapping_ticks",
        rows=ROWS,
        processes=PROCESSES,
        requests=sum(received.values()),
        duplicates=duplicates,
        lost=lost,
        left_by_the_overlap=ROWS - by_the_overlap,
        claimed="+".join(str(s["claimed"]) for s in summaries),
        process_seconds="/".join(f"{r.seconds:.1f}" for r in results),
        seconds=seconds,
    )
    assert received.keys() == expected
    assert duplicates == 0
    assert lost == 0
    assert set(Notification.objects.values_list("state", "next_fire_at")) == {("completed", None)}
    assert Delivery.objects.filter(outcome="delivered").count() == ROWS
    assert Delivery.objects.count() == ROWS
    # Every claim is accounted for: delivered once, or given back unattempted when the one
    # endpoint had no free slot in that tick (and claimed again later).
    assert sum(s["claimed"] for s in summaries) == ROWS + sum(s["released"] for s in summaries)
    assert sum(s["delivered"] for s in summaries) == ROWS
    assert sum(s["fenced_out"] + s["errors"] for s in summaries) == 0
