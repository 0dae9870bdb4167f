"""Two publishes of one event_id at the same moment on real PostgreSQL connections: one
message and one set of deliveries, and both callers are answered that message.

The test holds an uncommitted message with the same event id while both publishes start, so
both pass their dedup lookup and wait on the unique index; it waits until both wait (seen in
pg_stat_activity), then rolls back and lets them race for the key."""

import uuid

import pytest
from django.db import transaction

from delivery.models import Notification
from tests.conftest import requires_postgres
from tests.delivery.factories import make_endpoint, make_tenant
from tests.support.concurrency import Threads, wait_for_lock_waiters
from webhooks.event_types import event_type_create
from webhooks.messages import publish_message
from webhooks.models import Message

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True)]


class _Rollback(Exception):
    pass


def test_two_publishes_of_one_event_id_make_one_message():
    tenant = make_tenant()
    make_endpoint(tenant=tenant, url="https://a.example.com/hook")
    make_endpoint(tenant=tenant, url="https://b.example.com/hook")
    event_type_create(tenant=tenant, name="order.shipped")

    def publish() -> uuid.UUID:
        return publish_message(
            tenant=tenant, event_type="order.shipped", payload={}, event_id="e-1"
        ).id

    publishes = Threads([publish, publish])
    with pytest.raises(_Rollback), transaction.atomic():
        Message.objects.create(tenant=tenant, event_type="x", dedup_key="e-1")
        publishes.start()
        wait_for_lock_waiters(2)  # both passed their dedup lookup and wait on the key
        raise _Rollback
    answers = publishes.join()

    [message] = Message.objects.filter(tenant=tenant)
    assert answers == [message.id, message.id]
    assert Notification.objects.filter(message=message).count() == 2
