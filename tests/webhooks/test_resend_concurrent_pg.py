"""Resends racing on real PostgreSQL connections never start a second chain of attempts.

Two resends of one delivery: the test holds the message's row while both start, so both
wait to read the delivery at the same moment; it waits until both wait (seen in
pg_stat_activity), then lets them go. A resend racing the tick: the test claims the
delivery as run_tick does, in a transaction still open while the resend reads the row
unclaimed and waits to write it; the claim commits first and the resend is refused."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from delivery.conflicts import NotificationClaimed
from delivery.models import Notification, NotificationState
from tests.conftest import requires_postgres
from tests.delivery.factories import make_endpoint, make_tenant
from tests.support.concurrency import Threads, wait_for_lock_waiters
from webhooks.event_types import event_type_create
from webhooks.messages import message_resend, publish_message
from webhooks.models import Message

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True)]


def _message_to_one_endpoint(**state):
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url="https://a.example.com/hook")
    event_type_create(tenant=tenant, name="order.shipped")
    message = publish_message(tenant=tenant, event_type="order.shipped", payload={})
    Notification.objects.filter(message=message).update(**state)
    return tenant, endpoint, message


@pytest.mark.parametrize(
    ("state", "rows"),
    [
        ({"state": NotificationState.COMPLETED, "next_fire_at": None}, 2),
        ({"state": NotificationState.BACKING_OFF, "error_count": 2}, 1),
    ],
)
def test_two_resends_at_once_make_one_chain(state, rows):
    tenant, endpoint, message = _message_to_one_endpoint(**state)

    def resend():
        return message_resend(tenant=tenant, message_id=message.id, endpoint_id=endpoint.id).id

    resends = Threads([resend, resend])
    with transaction.atomic():
        Message.objects.select_for_update().get(pk=message.pk)
        resends.start()
        wait_for_lock_waiters(2)  # both wait to read the message's deliveries
    first, second = resends.join()

    assert first == second
    deliveries = Notification.objects.filter(message=message)
    assert deliveries.count() == rows
    pending = deliveries.get(pk=first)
    assert (pending.state, pending.error_count) == (NotificationState.SCHEDULED, 0)


def test_a_resend_racing_the_tick_s_claim_is_refused_and_leaves_one_chain():
    tenant, endpoint, message = _message_to_one_endpoint(
        state=NotificationState.BACKING_OFF, error_count=2
    )
    rows = Notification.objects.filter(message=message)

    def resend():
        return message_resend(tenant=tenant, message_id=message.id, endpoint_id=endpoint.id)

    resends = Threads([resend])
    with transaction.atomic():
        # The claim's own statement: a lease and a new token, not yet committed.
        rows.update(
            claimed_until=timezone.now() + timedelta(minutes=5),
            claim_token=F("claim_token") + 1,
        )
        resends.start()
        wait_for_lock_waiters(1)  # the resend read the row unclaimed and waits to write it
    with pytest.raises(NotificationClaimed):
        resends.join()

    [claimed] = rows
    assert (claimed.state, claimed.error_count) == (NotificationState.BACKING_OFF, 2)
