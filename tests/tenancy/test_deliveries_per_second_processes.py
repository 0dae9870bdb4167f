"""`deliveries_per_second` held by two tick processes together on PostgreSQL: they share
the tenant's pacing budget, so the receiver sees the plan's rate, not twice it."""

import signal
import subprocess
import sys
import threading
import time

import pytest
from django.utils import timezone

from delivery.models import Delivery, DeliveryOutcome
from tests.conftest import requires_postgres
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant
from tests.support.http_server import Reply, recording_server
from tests.support.processes import ROOT, subprocess_env, wait_until
from tests.tenancy.plans_support import put_on_plan

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True)]

RATE = 5
ROWS = 15


def test_two_tick_processes_together_hold_the_plans_rate():
    tenant = make_tenant("paced")
    put_on_plan(tenant, deliveries_per_second=RATE)
    received: list[float] = []
    lock = threading.Lock()

    def answer(request) -> Reply:
        with lock:
            received.append(time.monotonic())
        return Reply(200)

    with recording_server(answer) as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        started = time.monotonic()
        make_notifications(ROWS, tenant=tenant, endpoint=endpoint, next_fire_at=timezone.now())
        processes = [
            subprocess.Popen(
                [sys.executable, "manage.py", "run_tick", "--loop", "--interval", "0.1"],
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

    assert len(received) == ROWS
    # Slots lie 1/RATE apart from the first, which is no earlier than the rows: the last
    # delivery cannot come sooner, however fast the machine.
    assert max(received) - started >= (ROWS - 1) / RATE
    # Counts per one-second window: the slots hold RATE a second; a delivery that started
    # late on a busy machine may land in the next window, never a whole second's more. Two
    # processes without the shared budget would send all rows in the first window.
    per_window = [sum(at <= t < at + 1 for t in received) for at in received]
    assert max(per_window) < 2 * RATE
    delivered = Delivery.objects.filter(tenant=tenant, outcome=DeliveryOutcome.DELIVERED)
    assert delivered.count() == ROWS
    assert not Delivery.objects.filter(tenant=tenant, outcome=DeliveryOutcome.FAILED).exists()
