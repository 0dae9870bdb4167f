"""manage.py run_tick: one summary line per tick, argument errors, SIGTERM in --loop mode."""

import re
import signal
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError
from django.utils import timezone

from dbqueue.worker import ConnectionLost
from delivery.models import Delivery, Notification
from delivery.scheduler.tick import TickSummary
from tests.conftest import requires_postgres
from tests.delivery.factories import (
    make_endpoint,
    make_notification,
    make_notifications,
    make_tenant,
)
from tests.support.http_server import Reply, recording_server
from tests.support.processes import ROOT, fail_with, session_ended, subprocess_env, wait_until

SUMMARY = re.compile(
    r"event=run_tick claimed=\d+ delivered=\d+ partial=\d+ backed_off=\d+ deferred=\d+ "
    r"released=\d+ dead_lettered=\d+ suppressed=\d+ fenced_out=\d+ errors=\d+ skipped=\d+ "
    r"due_left=\d+ "
    r"late_max_s=\d+\.\d{3} duration_s=\d+\.\d{3}"
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
    assert line.startswith("event=run_tick claimed=1 delivered=1 partial=0 backed_off=0 ")


@pytest.mark.parametrize("arguments", [["--limit", "0"], ["--limit", "-3"], ["--interval", "0"]])
def test_bad_arguments_are_a_clear_command_error(db, arguments):
    with pytest.raises(CommandError, match="must be a positive"):
        call_command("run_tick", *arguments)


def test_a_lost_database_is_one_error_line_and_a_failed_command(db, monkeypatch):
    monkeypatch.setattr("delivery.scheduler.tick.notification_claim", fail_with(session_ended()))
    out = StringIO()

    with pytest.raises(CommandError) as raised:
        call_command("run_tick", stdout=out)

    assert str(raised.value) == (
        "run_tick: cannot reach the database (terminating connection due to administrator command)"
    )
    assert out.getvalue().startswith("event=run_tick claimed=0 ")


def test_a_tick_that_loses_its_database_stops_claiming(db, settings, monkeypatch):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    settings.TICK_CONCURRENCY = 1
    monkeypatch.setattr("delivery.scheduler.tick.write_back", fail_with(session_ended()))
    tenant = make_tenant()
    out = StringIO()
    with recording_server() as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        make_notifications(150, tenant=tenant, endpoint=endpoint, next_fire_at=timezone.now())

        with pytest.raises(CommandError, match="cannot reach the database"):
            call_command("run_tick", stdout=out)

    # The second claim (the endpoint's queue: the one worker was busy) came before the first
    # row's write-back found the database gone (new rows start first); its first row went
    # out, the rest were never started; nothing was claimed after that.
    claimed = int(re.search(r"claimed=(\d+) ", out.getvalue())[1])
    assert 2 <= claimed <= 1 + settings.TICK_LIMIT
    assert len(server.received()) == 2
    assert out.getvalue().startswith(f"event=run_tick claimed={claimed} delivered=0 ")
    assert f" errors={claimed} " in out.getvalue()
    # Those stay claimed until their lease ends; the others were left alone.
    assert Notification.objects.filter(claimed_until__isnull=False).count() == claimed
    assert Notification.objects.filter(claim_token=0).count() == 150 - claimed


def test_a_write_back_that_fails_with_the_database_still_there_does_not_stop_the_tick(
    db, settings, monkeypatch
):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    settings.TICK_CONCURRENCY = 1
    monkeypatch.setattr("delivery.scheduler.tick.write_back", fail_with(DatabaseError("disk full")))
    tenant = make_tenant()
    out = StringIO()
    with recording_server() as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        make_notifications(3, tenant=tenant, endpoint=endpoint, next_fire_at=timezone.now())

        call_command("run_tick", stdout=out)

    assert len(server.received()) == 3
    assert out.getvalue().startswith("event=run_tick claimed=3 delivered=0 ")
    assert " errors=3 " in out.getvalue()


def test_loop_reports_a_lost_database_and_keeps_ticking(db, monkeypatch):
    ticks: list[int] = []

    def tick(*, max_rows, stop, woken, linger):
        ticks.append(1)
        if len(ticks) == 1:
            raise ConnectionLost(TickSummary(claimed=2, errors=2)) from session_ended()
        stop.set()
        return TickSummary(claimed=1, delivered=1)

    monkeypatch.setattr("delivery.scheduler.tick.run_tick", tick)
    out, err = StringIO(), StringIO()

    call_command("run_tick", "--loop", "--interval", "0.01", stdout=out, stderr=err)

    assert len(ticks) == 2
    first, second = out.getvalue().splitlines()
    assert first.startswith("event=run_tick claimed=2 delivered=0 ")
    assert second.startswith("event=run_tick claimed=1 delivered=1 ")
    assert err.getvalue() == (
        "run_tick: cannot reach the database "
        "(terminating connection due to administrator command)\n"
    )


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
    assert Notification.objects.values_list("state", "next_fire_at").get(pk=row.pk) == (
        "completed",
        None,
    )
    assert Delivery.objects.get(notification_id=row.pk).outcome == "delivered"
