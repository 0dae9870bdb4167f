"""Several tick processes at once over thousands of due rows: each row is delivered exactly
once (counted at the receiving server by webhook-id) and none is left behind."""

import subprocess
import sys
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from notifications.models import Delivery, Notification
from tests.conftest import requires_postgres
from tests.notifications.factories import make_endpoint, make_notifications, make_tenant
from tests.notifications.test_tick_command import ROOT, subprocess_env
from tests.support.http_server import recording_server

ROWS = 2000
PROCESSES = 4

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True)]


def test_overlapping_ticks_deliver_every_row_exactly_once():
    tenant = make_tenant()
    with recording_server() as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        rows = make_notifications(
            ROWS, tenant=tenant, endpoint=endpoint, next_fire_at=timezone.now() - timedelta(1)
        )
        ticks = [
            subprocess.Popen(
                [sys.executable, "manage.py", "run_tick", "--limit", str(ROWS)],
                cwd=ROOT,
                env=subprocess_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(PROCESSES)
        ]
        outputs = [tick.communicate(timeout=120) for tick in ticks]
        received = Counter(request.headers["webhook-id"] for request in server.received())

    assert [tick.returncode for tick in ticks] == [0] * PROCESSES, outputs
    expected = {f"notification_{row.pk}_1" for row in rows}
    assert set(received) == expected
    assert max(received.values()) == 1
    assert not Notification.objects.exists()
    assert Delivery.objects.filter(outcome="delivered").count() == ROWS
    claimed = sum(int(out.split("claimed=")[1].split()[0]) for out, _ in outputs)
    assert claimed == ROWS
