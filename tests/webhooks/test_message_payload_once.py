"""A message's payload is stored once, with the message: its deliveries hold no copy, the
tick reads the payloads of the rows it claimed in one query, and what a receiver gets (every
attempt, resend and recovery, and rows stored when deliveries still held the payload) is the
same signed body, byte for byte."""

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from standardwebhooks import Webhook

from dbqueue.clock import Clock
from delivery.models import Notification, WebhookEndpoint
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
from delivery.transports.base import DeliveryResult
from jobs.consumer import jobs_drain
from tests.delivery.factories import make_endpoint
from tests.delivery.test_tick_queries import STATEMENTS_PER_FIRST_TICK
from tests.support.http_server import Reply, recording_server
from webhooks import messages as webhook_messages
from webhooks.event_types import event_type_create
from webhooks.messages import message_resend, publish_message
from webhooks.models import Message
from webhooks.recovery import endpoint_recover

# About 100 KiB of JSON: large beside everything else a delivery row holds.
PAYLOAD = {"items": [{"id": n, "note": f"{n:04d}" * 24} for n in range(1000)]}
PAYLOAD_BYTES = len(json.dumps(PAYLOAD, separators=(",", ":")))


@pytest.fixture(autouse=True)
def _order_shipped(tenant):
    """A type of the tenant's own: the product's types are the product's to publish."""
    event_type_create(tenant=tenant, name="order.shipped")


def _endpoints(tenant, count, url="https://hooks.example.com/in"):
    return WebhookEndpoint.objects.bulk_create(
        [WebhookEndpoint(tenant=tenant, url=url, secret="whsec_dGVzdA==") for _ in range(count)]
    )


def _sent_body(message) -> bytes:
    """The body a delivery of `message` has always been sent with: the Standard Webhooks
    event, compact JSON, in this key order."""
    event = {
        "type": message.event_type,
        "timestamp": message.created_at.isoformat().replace("+00:00", "Z"),
        "data": message.payload,
    }
    return json.dumps(event, separators=(",", ":")).encode()


class _BytesBound:
    """Counts the bytes of the parameters every statement hands the database."""

    def __init__(self) -> None:
        self.total = 0

    def __call__(self, execute, sql, params, many, context):
        batches = params if many else [params]
        self.total += sum(_size(value) for batch in batches for value in batch or ())
        return execute(sql, params, many, context)


def _size(value) -> int:
    # PostgreSQL's JSON parameters come wrapped (psycopg's Jsonb): measure what they wrap.
    if hasattr(value, "obj"):
        return len(json.dumps(value.obj, default=str))
    return len(str(value))


def _relation_size(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_total_relation_size(%s)", [table])
        return cursor.fetchone()[0]


@pytest.mark.parametrize("endpoints", [1, 40])
def test_a_large_payload_is_stored_and_sent_to_the_database_once_whatever_the_endpoints(
    tenant, endpoints
):
    _endpoints(tenant, endpoints)
    postgresql = connection.vendor == "postgresql"
    table = Notification._meta.db_table
    size_before = _relation_size(table) if postgresql else 0
    bound = _BytesBound()

    with connection.execute_wrapper(bound):
        message = publish_message(tenant=tenant, event_type="order.shipped", payload=PAYLOAD)

    assert Message.objects.get(tenant=tenant).payload == PAYLOAD
    rows = Notification.objects.filter(message=message)
    assert rows.count() == endpoints
    for event in rows.values_list("webhook_event", flat=True):
        assert set(event) == {"type", "timestamp"}
    # Everything a delivery row holds together is small: nothing in it grows with the payload.
    widest = max(len(json.dumps(list(row.values()), default=str)) for row in rows.values())
    assert widest < 2_000
    # The payload went to the database once (the message), not once per delivery.
    assert PAYLOAD_BYTES < bound.total < PAYLOAD_BYTES + 2_000 * (endpoints + 5)
    if postgresql:
        assert _relation_size(table) - size_before < PAYLOAD_BYTES


@pytest.mark.usefixtures("local_channels")
def test_every_endpoint_gets_the_same_signed_body_as_ever_old_rows_with_their_copy_too(tenant):
    with recording_server(lambda request: Reply()) as server:
        endpoints = [make_endpoint(tenant=tenant, url=f"{server.url}/new{n}") for n in range(3)]
        message = publish_message(tenant=tenant, event_type="order.shipped", payload=PAYLOAD)
        # A delivery stored before the payload lived with its message alone: it holds its own.
        old_style = make_endpoint(tenant=tenant, url=f"{server.url}/old")
        stored = Notification.objects.filter(message=message).first()
        assert stored is not None
        stored.pk, stored.webhook_endpoint = None, old_style
        stored.webhook_event = {**stored.webhook_event, "data": message.payload}
        stored.save(force_insert=True)

        summary = run_tick(now=message.created_at + timedelta(seconds=1))
        received = {request.path: request for request in server.received()}

    assert summary.delivered == 4
    for endpoint in [*endpoints, old_style]:
        request = received[endpoint.url.removeprefix(server.url)]
        assert request.body == _sent_body(message)
        assert request.headers["webhook-id"] == f"msg_{message.id}"
        Webhook(endpoint.secret).verify(request.body, request.headers)


@pytest.mark.usefixtures("local_channels")
def test_a_resend_and_a_recovery_send_the_same_body(tenant):
    answers = iter([Reply(status=500)])
    with recording_server(lambda request: next(answers, Reply())) as server:
        endpoint = make_endpoint(tenant=tenant, url=f"{server.url}/hook")
        now = timezone.now()
        message = publish_message(
            tenant=tenant, event_type="order.shipped", payload=PAYLOAD, now=now
        )
        Notification.objects.filter(message=message).update(max_attempts=1)
        assert run_tick(now=now + timedelta(seconds=1)).dead_lettered == 1

        endpoint_recover(tenant=tenant, endpoint_id=endpoint.id, since=now - timedelta(hours=1))
        jobs_drain(clock=Clock(), limit=10, max_seconds=30)
        assert run_tick(now=timezone.now() + timedelta(seconds=1)).delivered == 1

        message_resend(tenant=tenant, message_id=message.id, endpoint_id=endpoint.id)
        assert run_tick(now=timezone.now() + timedelta(seconds=1)).delivered == 1
        requests = server.received("/hook")

    assert len(requests) == 3  # the failed attempt, the recovered one, the resend
    for request in requests:
        assert request.body == _sent_body(message)
        Webhook(endpoint.secret).verify(request.body, request.headers)


@pytest.mark.parametrize("messages", [3, 30])
def test_the_tick_reads_the_payloads_of_its_claim_in_one_statement(
    tenant, settings, django_assert_num_queries, messages
):
    # The same statements as a tick of plain rows (test_tick_queries), plus one read of the
    # messages, however many deliveries of however many messages it sends.
    settings.WEBHOOK_ENDPOINT_CONCURRENCY = messages + 1
    make_endpoint(tenant=tenant, url="http://127.0.0.1:9/unused")
    published = [
        publish_message(tenant=tenant, event_type="order.shipped", payload={"n": n})
        for n in range(messages)
    ]
    sent = []

    def webhook(message, *, timeout):
        sent.append(message.payload)
        return DeliveryResult(ok=True, http_status=200)

    with django_assert_num_queries(STATEMENTS_PER_FIRST_TICK + 1):
        summary = run_tick(
            now=timezone.now() + timedelta(seconds=1),
            concurrency=messages + 1,
            senders=Senders(webhook=webhook),
        )

    assert summary.delivered == messages
    assert sorted(sent, key=lambda event: event["data"]["n"]) == [
        {
            "type": "order.shipped",
            "timestamp": message.created_at.isoformat().replace("+00:00", "Z"),
            "data": {"n": n},
        }
        for n, message in enumerate(published)
    ]


def test_the_claimed_rows_payloads_are_one_query_and_old_rows_need_none(
    tenant, django_assert_num_queries
):
    _endpoints(tenant, 2)
    message = publish_message(tenant=tenant, event_type="order.shipped", payload={"p": 1})
    rows = list(Notification.objects.filter(message=message))
    old = rows[0]
    old.webhook_event = {**old.webhook_event, "data": {"p": 1}}

    with django_assert_num_queries(1):
        decided = webhook_messages.payloads_for_claimed(rows, timezone.now())

    assert set(decided) == {rows[1].pk}
    assert decided[rows[1].pk].webhook_data == {"p": 1}
    with CaptureQueriesContext(connection) as captured:
        assert webhook_messages.payloads_for_claimed([old], timezone.now()) == {}
    assert captured.captured_queries == []
