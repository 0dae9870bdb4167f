"""On PostgreSQL: a row that becomes due now wakes a listening `run_tick --loop` at commit,
one notification per transaction, and a write that leaves a due row due wakes nobody."""

import time
from datetime import timedelta

import psycopg
import pytest
from django.db import connection, transaction
from django.utils import timezone

from dbqueue.listen import LISTEN_DB_ALIAS, ListenWaiter
from delivery.models import Notification, NotificationState
from delivery.scheduler.tick import NOTIFY_CHANNEL, tick_worker
from tests.conftest import requires_postgres
from tests.delivery.factories import make_endpoint, make_notification, make_notifications
from tests.support.concurrency import Threads
from tests.support.http_server import Reply, recording_server

pytestmark = [
    requires_postgres,
    pytest.mark.django_db(transaction=True, databases=["default", LISTEN_DB_ALIAS]),
]

SENTINEL = "sentinel"


@pytest.fixture
def listener(settings):
    settings.DATABASE_LISTEN_URL = "postgres://…"  # tests/conftest.py made the alias
    waiter = ListenWaiter(NOTIFY_CHANNEL)
    raw = waiter.connect()
    yield raw
    waiter.close()


def wake_ups(raw: psycopg.Connection) -> int:
    """The notifications the tick's channel got from the transactions committed so far: a
    sentinel notified last arrives after all of them (delivery follows commit order)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [NOTIFY_CHANNEL, SENTINEL])
    for before_sentinel, notify in enumerate(raw.notifies(timeout=60)):
        if notify.payload == SENTINEL:
            return before_sentinel
    raise AssertionError("the sentinel notification never arrived")


def test_inserting_rows_due_now_notifies_once_per_transaction(alice, listener):
    now = timezone.now()
    make_notifications(100, tenant=alice.tenant, next_fire_at=now - timedelta(seconds=1))
    assert wake_ups(listener) == 1

    with transaction.atomic():
        for _ in range(3):
            make_notification(tenant=alice.tenant, next_fire_at=now)
    assert wake_ups(listener) == 1


def test_rows_due_later_or_off_the_schedule_notify_nobody(alice, listener):
    now = timezone.now()
    make_notifications(10, tenant=alice.tenant, next_fire_at=now + timedelta(minutes=5))
    make_notification(tenant=alice.tenant, next_fire_at=None)
    assert wake_ups(listener) == 0


def test_a_row_that_becomes_due_notifies_and_one_that_stays_due_does_not(alice, listener):
    now = timezone.now()
    later = make_notification(tenant=alice.tenant, next_fire_at=now + timedelta(hours=1))
    due = make_notification(tenant=alice.tenant, next_fire_at=now - timedelta(seconds=5))
    dead = make_notification(
        tenant=alice.tenant, next_fire_at=None, dead_letter_reason="max_attempts"
    )
    assert wake_ups(listener) == 1  # the due one's insert

    # What a tick writes back for a row it gave back unattempted, and a lease change.
    Notification.objects.filter(pk=due.pk).update(state=NotificationState.SCHEDULED)
    Notification.objects.filter(pk=due.pk).update(claimed_until=now, claim_token=7)
    assert wake_ups(listener) == 0

    # Brought forward (a resend), and retried out of the dead letters.
    Notification.objects.filter(pk=later.pk).update(next_fire_at=now)
    assert wake_ups(listener) == 1
    Notification.objects.filter(pk=dead.pk).update(
        state=NotificationState.SCHEDULED, next_fire_at=now, dead_letter_reason=""
    )
    assert wake_ups(listener) == 1

    # Deferred or backed off into the future, or completed: nobody to wake.
    Notification.objects.filter(pk=due.pk).update(next_fire_at=now + timedelta(minutes=1))
    Notification.objects.filter(pk=later.pk).update(
        state=NotificationState.COMPLETED, next_fire_at=None
    )
    assert wake_ups(listener) == 0


def test_a_looping_tick_delivers_a_row_due_now_long_before_its_interval(alice, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    settings.DATABASE_LISTEN_URL = "postgres://…"
    lines: list[str] = []
    worker = tick_worker(
        max_rows=None, interval=3600, report=lines.append, report_error=lines.append
    )
    with recording_server(lambda request: Reply(200)) as server:
        endpoint = make_endpoint(tenant=alice.tenant, url=f"{server.url}/hook")
        loop = Threads([worker.run_loop]).start()
        try:
            assert worker.idle.wait(60)  # the first (empty) tick is done; it now waits
            row = make_notification(
                tenant=alice.tenant, endpoint=endpoint, next_fire_at=timezone.now()
            )
            for _ in range(600):
                if Notification.objects.get(pk=row.pk).state == NotificationState.COMPLETED:
                    break
                time.sleep(0.1)
        finally:
            worker.stop()
            loop.join(60)
        received = server.received("/hook")

    assert Notification.objects.get(pk=row.pk).state == NotificationState.COMPLETED
    assert len(received) == 1
    assert worker.timed_wakeups == 0  # the one-hour interval never came round
    assert worker.notified_wakeups >= 1


def test_a_tick_in_progress_learns_of_rows_due_without_waiting(alice, settings):
    settings.DATABASE_LISTEN_URL = "postgres://…"
    waiter = ListenWaiter(NOTIFY_CHANNEL)
    waiter.open()
    try:
        assert waiter.woken() is False
        make_notification(tenant=alice.tenant, next_fire_at=timezone.now())
        deadline = time.monotonic() + 60
        while not waiter.woken():
            assert time.monotonic() < deadline, "the notification never arrived"
            time.sleep(0.05)
        assert waiter.woken() is False  # taken up once
    finally:
        waiter.close()
