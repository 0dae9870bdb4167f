"""Two publishes of one event_id at the same moment on real PostgreSQL connections: one
message and one set of deliveries, and both callers are answered that message.

The test holds an uncommitted message with the same event id while both publishes start, so
both pass their dedup lookup and wait on the unique index; it waits until both wait (seen in
pg_stat_activity), then rolls back and lets them race for the key."""

import threading
import time

import pytest
from django.db import connection, transaction

from notifications.messages import publish_message
from notifications.models import Message, Notification
from tests.conftest import requires_postgres
from tests.notifications.factories import make_endpoint, make_tenant

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True)]

WAIT_SECONDS = 30


def _waiting_on_locks() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


class _Rollback(Exception):
    pass


def test_two_publishes_of_one_event_id_make_one_message():
    tenant = make_tenant()
    make_endpoint(tenant=tenant, url="https://a.example.com/hook")
    make_endpoint(tenant=tenant, url="https://b.example.com/hook")
    answers: list = []
    guard = threading.Lock()

    def publish() -> None:
        try:
            message = publish_message(
                tenant=tenant, event_type="project.active", payload={}, event_id="e-1"
            )
            with guard:
                answers.append(message.id)
        finally:
            connection.close()

    threads = [threading.Thread(target=publish) for _ in range(2)]
    with pytest.raises(_Rollback), transaction.atomic():
        Message.objects.create(tenant=tenant, event_type="x", dedup_key="e-1")
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + WAIT_SECONDS
        while _waiting_on_locks() < len(threads):
            assert time.monotonic() < deadline, "the publishes never waited on the key"
            time.sleep(0.01)
        raise _Rollback
    for thread in threads:
        thread.join(timeout=WAIT_SECONDS)

    [message] = Message.objects.filter(tenant=tenant)
    assert answers == [message.id, message.id]
    assert Notification.objects.filter(message=message).count() == 2
