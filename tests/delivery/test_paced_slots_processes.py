"""An endpoint's `rate_limit` held by two looping tick processes together on PostgreSQL:
they reserve slots of one budget in the database, so none is handed out twice, and a
backlog waiting for them is delivered once a row, without a deferral."""

import signal
import subprocess
import sys
import threading
import time

import pytest
from django.utils import timezone

from dbqueue.models import WorkerTotal
from delivery.models import Delivery, DeliveryOutcome
from tests.conftest import requires_postgres
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant
from tests.support.http_server import Reply, recording_server
from tests.support.processes import ROOT, subprocess_env, wait_until

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True)]

RATE = 5
ROWS = 40


def test_two_tick_processes_share_the_slots_and_claim_each_row_about_once():
    tenant = make_tenant("paced")
    received: list[tuple[float, str]] = []
    lock = threading.Lock()

    def answer(request) -> Reply:
        with lock:
            received.append((time.monotonic(), request.headers.get("webhook-id", "")))
        return Reply(200)

    with recording_server(answer) as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        endpoint.rate_limit = RATE
        endpoint.save()
        started = time.monotonic()
        make_notifications(ROWS, tenant=tenant, endpoint=endpoint, next_fire_at=timezone.now())
        processes = [
            subprocess.Popen(
                [sys.executable, "manage.py", "run_tick", "--loop", "--interval", "0.2"],
                cwd=ROOT,
                env=subprocess_env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        try:
            wait_until(lambda: len(server.received()) >= ROWS, timeout=120)
        finally:
            for process in processes:
                process.send_signal(signal.SIGTERM)
            for process in processes:
                process.communicate(timeout=60)

    times = sorted(at for at, _ in received)
    assert len(received) == ROWS
    assert len({message for _, message in received}) == ROWS  # each row once
    # Slots lie 1/RATE apart from the first, which is no earlier than the rows: the last
    # delivery cannot come sooner, however fast the machine, unless two processes used
    # one slot each.
    assert times[-1] - started >= (ROWS - 1) / RATE
    delivered = Delivery.objects.filter(outcome=DeliveryOutcome.DELIVERED)
    assert delivered.count() == ROWS
    assert not Delivery.objects.filter(outcome=DeliveryOutcome.DEFERRED).exists()
    claimed = WorkerTotal.objects.get(worker="run_tick", name="claimed").total
    # Each row is claimed once to be delivered; a process that found the other holding the
    # slots gave back at most a default share of rows now and then.
    assert claimed <= 2 * ROWS
