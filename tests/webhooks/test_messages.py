"""Publishing a message (webhooks.messages): subscriptions, event_id dedup and its
expiry, the payload limit, one insert per table whatever the endpoints, resend, and the
webhook-id a receiver sees on every attempt and resend, against a real local receiver."""

import json
import math
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from standardwebhooks import Webhook

from delivery.conflicts import EndpointDisabled, NotificationClaimed
from delivery.models import Notification, NotificationState, WebhookEndpoint
from delivery.scheduler.tick import run_tick
from tenancy.quotas import period_of, usage
from tests.delivery.factories import make_endpoint, make_tenant
from tests.support.http_server import Reply, recording_server
from web.errors import InvalidInput
from webhooks.event_types import event_type_archive, event_type_create
from webhooks.messages import (
    MAX_PAYLOAD_BYTES,
    message_endpoint_deliveries,
    message_resend,
    product_event_publish,
    publish_message,
)
from webhooks.models import Message

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _order_shipped(tenant):
    """A type of the tenant's own: the product's types are the product's to publish."""
    event_type_create(tenant=tenant, name="order.shipped")


def _endpoint(tenant, name="a", **fields):
    return make_endpoint(tenant=tenant, url=f"https://{name}.example.com/hook", **fields)


def _queued(message):
    return set(
        Notification.objects.filter(message=message).values_list("webhook_endpoint_id", flat=True)
    )


def test_a_message_goes_to_every_enabled_endpoint_subscribed_to_its_type(tenant):
    event_type_create(tenant=tenant, name="invoice.paid")
    event_type_create(tenant=tenant, name="invoice.voided")
    everything = _endpoint(tenant, "all")
    paid = _endpoint(tenant, "paid", event_types=["invoice.paid"])
    voided = _endpoint(tenant, "voided", event_types=["invoice.voided"])
    _endpoint(tenant, "off", enabled=False)
    _endpoint(make_tenant("Other"), "theirs")

    message = publish_message(tenant=tenant, event_type="invoice.paid", payload={"id": 7}, now=NOW)

    assert _queued(message) == {everything.id, paid.id}
    assert set(message.endpoint_ids) == {str(everything.id), str(paid.id)}
    assert voided.id not in _queued(message)
    row = Notification.objects.get(message=message, webhook_endpoint=paid)
    assert (row.channels, row.state, row.next_fire_at) == (
        ["webhook"],
        NotificationState.SCHEDULED,
        NOW,
    )
    # The payload is the message's: the delivery row holds no copy of it.
    assert row.webhook_event == {"type": "invoice.paid", "timestamp": "2026-03-02T12:00:00Z"}
    assert message.payload == {"id": 7}


def test_the_product_s_own_types_are_published_without_being_created(tenant):
    endpoint = _endpoint(tenant)
    message = publish_message(tenant=tenant, event_type="order.shipped", payload={}, now=NOW)
    assert _queued(message) == {endpoint.id}


@pytest.mark.parametrize("name", ["never.made", "old.type"])
def test_an_unknown_or_archived_type_is_refused_and_writes_nothing(tenant, name):
    archived = event_type_create(tenant=tenant, name="old.type")
    event_type_archive(tenant=tenant, event_type_id=archived.id)
    _endpoint(tenant)

    with pytest.raises(InvalidInput) as raised:
        publish_message(tenant=tenant, event_type=name, payload={}, now=NOW)

    assert "event_type" in raised.value.errors
    assert not Message.objects.exists()
    assert not Notification.objects.exists()


def test_another_tenant_s_type_is_unknown_here(tenant):
    event_type_create(tenant=make_tenant("Other"), name="theirs.only")
    with pytest.raises(InvalidInput):
        publish_message(tenant=tenant, event_type="theirs.only", payload={}, now=NOW)


def test_a_payload_over_256_kib_is_refused(tenant):
    _endpoint(tenant)
    at_limit = {"x": "a" * (MAX_PAYLOAD_BYTES - len('{"x":""}'))}
    publish_message(tenant=tenant, event_type="order.shipped", payload=at_limit, now=NOW)
    over = {"x": at_limit["x"] + "a"}

    with pytest.raises(InvalidInput) as raised:
        publish_message(tenant=tenant, event_type="order.shipped", payload=over, now=NOW)

    assert raised.value.kind == "payload-too-large"
    assert Message.objects.count() == 1


def test_an_event_id_answers_the_first_message_for_24_hours_then_publishes_again(tenant):
    _endpoint(tenant)
    first = publish_message(
        tenant=tenant, event_type="order.shipped", payload={"n": 1}, event_id="e-1", now=NOW
    )
    repeat = publish_message(
        tenant=tenant,
        event_type="order.shipped",
        payload={"n": 2},
        event_id="e-1",
        now=NOW + timedelta(hours=23, minutes=59),
    )
    other = make_tenant("Other")
    event_type_create(tenant=other, name="order.shipped")
    other_tenant = publish_message(
        tenant=other,
        event_type="order.shipped",
        payload={},
        event_id="e-1",
        now=NOW,
    )

    assert repeat.id == first.id
    assert repeat.payload == {"n": 1}
    assert other_tenant.id != first.id
    assert Notification.objects.filter(tenant=tenant).count() == 1

    later = publish_message(
        tenant=tenant,
        event_type="order.shipped",
        payload={"n": 3},
        event_id="e-1",
        now=NOW + timedelta(hours=24, seconds=1),
    )
    assert later.id != first.id
    assert later.event_id == "e-1"
    assert Notification.objects.filter(tenant=tenant).count() == 2
    again = publish_message(
        tenant=tenant,
        event_type="order.shipped",
        payload={},
        event_id="e-1",
        now=NOW + timedelta(hours=25),
    )
    assert again.id == later.id


def test_publishing_to_100_endpoints_is_one_insert_per_table(tenant):
    WebhookEndpoint.objects.bulk_create(
        [
            WebhookEndpoint(tenant=tenant, url=f"https://e{i}.example.com/", secret="whsec_x")
            for i in range(100)
        ]
    )
    with CaptureQueriesContext(connection) as captured:
        message = publish_message(
            tenant=tenant, event_type="order.shipped", payload={"n": 1}, now=NOW
        )

    into = [
        match.group(1)
        for query in captured.captured_queries
        if (match := re.match(r'INSERT\b.*?\bINTO "?(\w+)', query["sql"]))
    ]
    rows = Notification.objects.filter(message=message)
    # SQLite binds at most 999 values per statement, so its batches are that size.
    fields = list(Notification._meta.concrete_fields)
    batch = connection.ops.bulk_batch_size(fields, list(rows)) or 100
    assert into.count("notifications_message") == 1
    assert into.count("notifications_notification") == math.ceil(100 / batch)
    if connection.vendor == "postgresql":
        assert into.count("notifications_notification") == 1
    assert rows.count() == 100
    # Besides the inserts: the event type and the endpoints (the plan's usage count and
    # transaction control aside).
    others = [
        query["sql"]
        for query in captured.captured_queries
        if not re.match(r"(INSERT|SAVEPOINT|RELEASE|ROLLBACK)\b", query["sql"])
        and "tenancy_usagecounter" not in query["sql"]
    ]
    assert len(others) == 2


def _resend(tenant, message, endpoint, *, at=NOW + timedelta(days=1)):
    return message_resend(tenant=tenant, message_id=message.id, endpoint_id=endpoint.id, now=at)


@pytest.mark.parametrize(
    "state",
    [
        {"state": NotificationState.SCHEDULED, "next_fire_at": NOW + timedelta(days=3)},
        {"state": NotificationState.BACKING_OFF, "error_count": 2, "last_error": "HTTP 503"},
        {"state": NotificationState.DEAD_LETTERED, "error_count": 3, "next_fire_at": None},
        {"state": NotificationState.PARKED, "error_count": 1, "next_fire_at": None},
    ],
)
def test_resend_brings_a_delivery_not_yet_delivered_forward_with_its_attempts_reset(tenant, state):
    endpoint = _endpoint(tenant)
    message = publish_message(tenant=tenant, event_type="order.shipped", payload={}, now=NOW)
    Notification.objects.filter(message=message).update(**state)
    [before] = Notification.objects.filter(message=message)

    row = _resend(tenant, message, endpoint)

    [stored] = Notification.objects.filter(message=message)
    assert row.id == stored.id == before.id
    assert stored.state == NotificationState.SCHEDULED
    assert stored.next_fire_at == stored.due_at == NOW + timedelta(days=1)
    assert (stored.error_count, stored.last_error, stored.dead_letter_reason) == (0, None, "")
    assert stored.claim_token == before.claim_token + 1
    assert stored.webhook_event == before.webhook_event


def test_resend_queues_a_delivered_delivery_again_once(tenant):
    endpoint = _endpoint(tenant)
    message = publish_message(tenant=tenant, event_type="order.shipped", payload={}, now=NOW)
    Notification.objects.filter(message=message).update(
        state=NotificationState.COMPLETED, next_fire_at=None, due_at=None
    )
    [delivered] = Notification.objects.filter(message=message)

    first = _resend(tenant, message, endpoint)
    second = _resend(tenant, message, endpoint, at=NOW + timedelta(days=2))

    assert first.id == second.id != delivered.id
    assert Notification.objects.filter(message=message).count() == 2
    again = Notification.objects.get(pk=first.id)
    assert (again.message_id, again.webhook_event) == (message.id, delivered.webhook_event)
    assert again.next_fire_at == NOW + timedelta(days=2)
    assert Notification.objects.get(pk=delivered.pk).state == NotificationState.COMPLETED


def test_resend_of_a_delivery_being_sent_is_refused_and_changes_nothing(tenant):
    endpoint = _endpoint(tenant)
    message = publish_message(tenant=tenant, event_type="order.shipped", payload={}, now=NOW)
    rows = Notification.objects.filter(message=message)
    rows.update(claimed_until=NOW + timedelta(days=1, seconds=30), claim_token=7)
    before = rows.values().get()

    with pytest.raises(NotificationClaimed):
        _resend(tenant, message, endpoint)

    assert rows.values().get() == before
    # The publish's use alone: a refused resend is not charged.
    assert usage(tenant.id, "messages_per_month", period_of(NOW)) == 1


def test_resend_to_a_disabled_endpoint_is_refused(tenant):
    endpoint = _endpoint(tenant)
    message = publish_message(tenant=tenant, event_type="order.shipped", payload={}, now=NOW)
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(enabled=False)
    before = Notification.objects.filter(message=message).values().get()

    with pytest.raises(EndpointDisabled):
        _resend(tenant, message, endpoint)

    assert Notification.objects.filter(message=message).values().get() == before


@pytest.mark.usefixtures("local_channels")
def test_resends_while_backing_off_make_one_chain_of_attempts(tenant):
    answers = iter([Reply(status=500), Reply(status=500)])
    with recording_server(lambda request: next(answers, Reply())) as server:
        endpoint = make_endpoint(tenant=tenant, url=f"{server.url}/hook")
        message = publish_message(tenant=tenant, event_type="order.shipped", payload={}, now=NOW)
        assert run_tick(now=NOW + timedelta(seconds=1)).backed_off == 1
        _resend(tenant, message, endpoint, at=NOW + timedelta(seconds=2))
        _resend(tenant, message, endpoint, at=NOW + timedelta(seconds=3))
        assert run_tick(now=NOW + timedelta(seconds=4)).backed_off == 1
        for hour in range(1, 5):
            run_tick(now=NOW + timedelta(hours=hour))
        requests = server.received("/hook")

    assert len(requests) == 3  # two failures, then the one success: no second chain
    assert Notification.objects.filter(message=message).count() == 1
    [history] = message_endpoint_deliveries(tenant=tenant, message_id=message.id)
    assert (history.status, history.attempts) == ("delivered", 3)


def test_resend_to_an_endpoint_the_message_never_targeted_or_of_another_tenant_is_missing(
    tenant,
):
    event_type_create(tenant=tenant, name="a.b")
    untargeted = _endpoint(tenant, "c", event_types=["a.b"])
    _endpoint(tenant)
    message = publish_message(tenant=tenant, event_type="order.shipped", payload={}, now=NOW)
    other = make_tenant("Other")
    theirs = _endpoint(other, "theirs")

    with pytest.raises(WebhookEndpoint.DoesNotExist):
        message_resend(tenant=tenant, message_id=message.id, endpoint_id=untargeted.id)
    with pytest.raises(WebhookEndpoint.DoesNotExist):
        message_resend(tenant=tenant, message_id=message.id, endpoint_id=theirs.id)
    with pytest.raises(Message.DoesNotExist):
        message_resend(tenant=other, message_id=message.id, endpoint_id=theirs.id)


@pytest.mark.usefixtures("local_channels")
def test_every_attempt_and_resend_carries_the_message_s_webhook_id(tenant):
    answers = iter([Reply(status=500)])
    with recording_server(lambda request: next(answers, Reply())) as server:
        endpoint = make_endpoint(tenant=tenant, url=f"{server.url}/hook")
        message = publish_message(
            tenant=tenant, event_type="order.shipped", payload={"p": 1}, now=NOW
        )
        assert run_tick(now=NOW + timedelta(seconds=1)).backed_off == 1
        [history] = message_endpoint_deliveries(tenant=tenant, message_id=message.id)
        assert history.status == "pending"
        assert run_tick(now=NOW + timedelta(hours=1)).delivered == 1
        message_resend(
            tenant=tenant, message_id=message.id, endpoint_id=endpoint.id, now=NOW + timedelta(2)
        )
        assert run_tick(now=NOW + timedelta(days=2, seconds=1)).delivered == 1
        requests = server.received("/hook")

    assert len(requests) == 3
    assert {request.headers["webhook-id"] for request in requests} == {f"msg_{message.id}"}
    assert len({request.body for request in requests}) == 1
    for request in requests:
        Webhook(endpoint.secret).verify(request.body, request.headers)
    assert json.loads(requests[0].body) == {
        "type": "order.shipped",
        "timestamp": "2026-03-02T12:00:00Z",
        "data": {"p": 1},
    }
    [history] = message_endpoint_deliveries(tenant=tenant, message_id=message.id)
    assert history.endpoint_id == endpoint.id
    assert (history.status, history.attempts, history.last_outcome) == (
        "delivered",
        3,
        "delivered",
    )
    assert history.last_http_status == 200
    assert history.last_attempted_at == NOW + timedelta(days=2, seconds=1)


@pytest.mark.usefixtures("local_channels")
def test_the_history_shows_each_endpoint_s_attempts_and_last_outcome(tenant):
    with recording_server(lambda request: Reply(status=400)) as server:
        bad = make_endpoint(tenant=tenant, url=f"{server.url}/bad")
        pending = _endpoint(tenant, "later")
        message = publish_message(tenant=tenant, event_type="order.shipped", payload={}, now=NOW)
        Notification.objects.filter(webhook_endpoint=pending).update(
            next_fire_at=NOW + timedelta(days=1)
        )
        run_tick(now=NOW + timedelta(seconds=1))

    deliveries = message_endpoint_deliveries(tenant=tenant, message_id=message.id)
    by_endpoint = {entry.endpoint_id: entry for entry in deliveries}
    assert by_endpoint[bad.id].status == "failed"
    assert by_endpoint[bad.id].attempts == 1
    assert by_endpoint[bad.id].last_outcome == "dead_lettered"
    assert by_endpoint[pending.id].status == "pending"
    assert by_endpoint[pending.id].attempts == 0
    assert by_endpoint[pending.id].next_attempt_at == NOW + timedelta(days=1)


@pytest.mark.usefixtures("local_channels")
def test_a_delivery_out_of_attempts_publishes_message_attempt_exhausted_once(tenant):
    with recording_server(
        lambda request: Reply(status=500) if request.path == "/failing" else Reply()
    ) as server:
        failing = make_endpoint(
            tenant=tenant, url=f"{server.url}/failing", event_types=["order.shipped"]
        )
        watcher = make_endpoint(
            tenant=tenant, url=f"{server.url}/watch", event_types=["message.attempt.exhausted"]
        )
        message = publish_message(tenant=tenant, event_type="order.shipped", payload={}, now=NOW)
        Notification.objects.filter(message=message).update(max_attempts=1)

        assert run_tick(now=NOW + timedelta(seconds=1)).dead_lettered == 1
        assert run_tick(now=NOW + timedelta(seconds=2)).delivered == 1
        assert run_tick(now=NOW + timedelta(hours=1)).claimed == 0

        [told] = server.received("/watch")
    body = json.loads(told.body)
    assert body["type"] == "message.attempt.exhausted"
    assert body["data"] == {
        "message_id": str(message.id),
        "event_type": "order.shipped",
        "endpoint_id": str(failing.id),
    }
    exhausted = Message.objects.get(tenant=tenant, event_type="message.attempt.exhausted")
    assert _queued(exhausted) == {watcher.id}


@pytest.mark.usefixtures("local_channels")
def test_an_exhausted_delivery_of_that_event_itself_publishes_nothing(tenant):
    with recording_server(lambda request: Reply(status=500)) as server:
        make_endpoint(
            tenant=tenant, url=f"{server.url}/hook", event_types=["message.attempt.exhausted"]
        )
        message = product_event_publish(
            tenant_id=tenant.id, event_type="message.attempt.exhausted", data={}, now=NOW
        )
        Notification.objects.filter(message=message).update(max_attempts=1)

        assert run_tick(now=NOW + timedelta(seconds=1)).dead_lettered == 1

    assert Message.objects.filter(tenant=tenant).count() == 1


@pytest.mark.usefixtures("local_channels")
def test_a_message_failing_at_every_endpoint_does_not_multiply_itself(tenant):
    # Endpoints subscribed to every type (event_types null) are not told of the product's
    # operational events: 5 failing endpoints make 5 deliveries, not 5 + 5 x 5.
    with recording_server(lambda request: Reply(status=500)) as server:
        for n in range(5):
            make_endpoint(tenant=tenant, url=f"{server.url}/hook{n}")
        message = publish_message(tenant=tenant, event_type="order.shipped", payload={}, now=NOW)
        Notification.objects.filter(message=message).update(max_attempts=1)

        assert run_tick(now=NOW + timedelta(seconds=1)).dead_lettered == 5
        assert run_tick(now=NOW + timedelta(seconds=2)).claimed == 0

    assert Notification.objects.filter(tenant=tenant).count() == 5
    [exhausted] = Message.objects.filter(tenant=tenant, event_type="message.attempt.exhausted")
    assert exhausted.endpoint_ids == []


@pytest.mark.usefixtures("local_channels")
def test_exhaustion_is_told_once_an_hour_to_healthy_endpoints_that_name_it_and_not_about(tenant):
    watched = ["order.shipped", "message.attempt.exhausted"]
    with recording_server(
        lambda request: Reply() if request.path == "/healthy" else Reply(status=500)
    ) as server:
        failing = [
            make_endpoint(tenant=tenant, url=f"{server.url}/failing{n}", event_types=watched)
            for n in range(3)
        ]
        healthy = make_endpoint(
            tenant=tenant, url=f"{server.url}/healthy", event_types=["message.attempt.exhausted"]
        )
        message = publish_message(tenant=tenant, event_type="order.shipped", payload={}, now=NOW)
        Notification.objects.filter(message=message).update(max_attempts=1)

        assert run_tick(now=NOW + timedelta(seconds=1)).dead_lettered == 3
        assert run_tick(now=NOW + timedelta(seconds=2)).delivered == 1
        assert run_tick(now=NOW + timedelta(minutes=5)).claimed == 0

        [told] = server.received("/healthy")
    assert json.loads(told.body)["data"]["endpoint_id"] in {str(e.id) for e in failing}
    exhausted = Message.objects.get(tenant=tenant, event_type="message.attempt.exhausted")
    assert _queued(exhausted) == {healthy.id}
