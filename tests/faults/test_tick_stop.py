"""A tick frozen with SIGSTOP past its lease while a second tick reclaims and delivers its
rows; after SIGCONT none of the frozen tick's write-backs lands: each is fenced out on
the claim token, and the rows show only the second tick's outcome."""

import signal
import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db.models import Max
from django.utils import timezone

from delivery.models import Delivery, DeliveryOutcome, Notification
from tests.conftest import requires_postgres
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant
from tests.faults.workers import wait_past, wait_until
from tests.support.http_server import Reply, recording_server

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True), pytest.mark.fault]

ROWS = 6
LEASE = 7
# One endpoint takes every row here: the fence, not endpoint isolation, is under test.
ENV = {
    "CHANNEL_TIMEOUT_SECONDS": "2",
    "CLAIM_LEASE_SECONDS": str(LEASE),
    "WEBHOOK_ENDPOINT_CONCURRENCY": "64",
}


def test_a_stopped_tick_past_its_lease_is_fenced_out_on_every_row(workers, report):
    tenant = make_tenant()
    first_answers = threading.Event()
    reclaimed = threading.Event()

    def responder(request) -> Reply:
        if reclaimed.is_set():
            return Reply(200)
        # The frozen tick's calls fail: had its write-back landed, the rows would be
        # backing off with error_count 1 instead of advanced by the second tick.
        first_answers.wait(30)
        return Reply(503)

    with recording_server(responder) as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        fire_at = timezone.now() - timedelta(minutes=1)
        rows = make_notifications(
            ROWS, tenant=tenant, endpoint=endpoint, next_fire_at=fire_at, rrule="FREQ=DAILY"
        )
        started = time.monotonic()
        frozen = workers("run_tick", app="fault_stop_a", env=ENV)
        wait_until(lambda: len(server.received()) == ROWS, timeout=30)
        frozen.process.send_signal(signal.SIGSTOP)
        first_answers.set()  # the answers wait in the frozen tick's sockets
        lease_end = Notification.objects.aggregate(last=Max("claimed_until"))["last"]
        wait_past(lease_end, timeout=LEASE + 10)

        reclaimed.set()
        second = workers("run_tick", app="fault_stop_b", env=ENV).finish(timeout=60)
        frozen.process.send_signal(signal.SIGCONT)
        first = frozen.finish(timeout=30)
        seconds = time.monotonic() - started
        received = Counter(r.headers["webhook-id"] for r in server.received())

    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    first_summary, second_summary = first.summary(), second.summary()
    fenced_lines = [line for line in first.stderr.splitlines() if "fenced out on " in line]
    dropped_attempts = list(
        Delivery.objects.exclude(outcome=DeliveryOutcome.DELIVERED).values_list(
            "outcome", flat=True
        )
    )
    report(
        "tick_sigstop",
        rows=ROWS,
        stopped_tick_claimed=first_summary["claimed"],
        stopped_tick_fenced_out=first_summary["fenced_out"],
        fenced_log_lines=len(fenced_lines),
        second_tick_delivered=second_summary["delivered"],
        second_tick_fenced_out=second_summary["fenced_out"],
        stopped_tick_attempts_logged=",".join(
            f"{outcome}:{count}" for outcome, count in Counter(dropped_attempts).items()
        ),
        requests=sum(received.values()),
        stopped_seconds=first.seconds,
        seconds=seconds,
    )
    assert first_summary["claimed"] == ROWS
    assert first_summary["fenced_out"] == ROWS
    assert second_summary["claimed"] == second_summary["delivered"] == ROWS
    assert second_summary["fenced_out"] == 0
    assert len(fenced_lines) == ROWS
    for row in rows:
        message = f"fenced out on back_off for row {row.pk}, claim_token=1"
        assert sum(message in line for line in fenced_lines) == 1, first.stderr
    # Both ticks called every row once, for the same occurrence.
    assert received == {f"notification_{row.pk}_1": 2 for row in rows}
    # The rows show the second tick's outcome only: advanced, no error, nothing claimed.
    for row in Notification.objects.all():
        assert (row.occurrence, row.error_count, row.last_error) == (2, 0, None)
        assert row.claim_token == 2
        assert row.claimed_until is None
        assert row.next_fire_at > timezone.now()
    assert Notification.objects.count() == ROWS
    # The delivery log keeps every call that happened: the second tick's deliveries and the
    # frozen tick's failed attempts, whose outcome (the backoff) was dropped.
    assert Delivery.objects.filter(outcome=DeliveryOutcome.DELIVERED).count() == ROWS
    assert len(dropped_attempts) == ROWS
    assert set(dropped_attempts) <= {DeliveryOutcome.FAILED, DeliveryOutcome.TIMEOUT}
    assert set(Delivery.objects.values_list("occurrence", flat=True)) == {1}
