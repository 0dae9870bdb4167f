"""manage.py run_tick: one summary line per tick, argument errors, SIGTERM in --loop mode."""

import os
import re
import signal
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from notifications.models import Delivery, Notification
from tests.conftest import requires_postgres
from tests.notifications.factories import make_endpoint, make_notification, make_tenant
from tests.support.http_server import Reply, recording_server

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = re.compile(
    r"event=run_tick claimed=\d+ delivered=\d+ partial=\d+ failed=\d+ dead_lettered=\d+ "
    r"fenced_out=\d+ errors=\d+ duration_s=\d+\.\d{3}"
)


def test_prints_exactly_one_summary_line(db, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    tenant = make_tenant()
    out = StringIO()
    with recording_server() as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=timezone.now())

        call_command("run_tick", stdout=out)

    [line] = out.getvalue().splitlines()
    assert SUMMARY.fullmatch(line)
    assert line.startswith("event=run_tick claimed=1 delivered=1 partial=0 failed=0 ")


@pytest.mark.parametrize("arguments", [["--limit", "0"], ["--limit", "-3"], ["--interval", "0"]])
def test_bad_arguments_are_a_clear_command_error(db, arguments):
    with pytest.raises(CommandError, match="must be a positive"):
        call_command("run_tick", *arguments)


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_loop_stops_on_sigterm_after_writing_back_the_row_in_flight():
    tenant = make_tenant()
    with recording_server(lambda r: Reply(200, delay=1.5)) as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        row = make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=timezone.now())
        process = subprocess.Popen(
            [sys.executable, "manage.py", "run_tick", "--loop", "--interval", "5"],
            cwd=ROOT,
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_until(lambda: server.received(), timeout=20)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=20)

    assert process.returncode == 0, stderr
    assert len(stdout.splitlines()) == 1
    assert SUMMARY.fullmatch(stdout.strip())
    assert "delivered=1" in stdout
    assert not Notification.objects.filter(pk=row.pk).exists()
    assert Delivery.objects.get(notification_id=row.pk).outcome == "delivered"


def subprocess_env() -> dict[str, str]:
    """The environment of a tick process using this test's PostgreSQL database."""
    settings_dict = connection.settings_dict
    url = (
        f"postgres://{settings_dict['USER']}@{settings_dict['HOST'] or '127.0.0.1'}:"
        f"{settings_dict['PORT'] or 5432}/{settings_dict['NAME']}"
    )
    return {
        **os.environ,
        "DATABASE_URL": url,
        "WEBHOOK_ALLOW_PRIVATE_TARGETS": "true",
        "SECRET_KEY": "test-only-secret-key-not-for-production",
    }


def wait_until(condition, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)
