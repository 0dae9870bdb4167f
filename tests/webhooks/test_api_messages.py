"""/v1/messages and endpoint subscriptions through the API: publish (Idempotency-Key
required, event_id dedup, payload limit), list and detail, the deliveries per endpoint,
resend (once per Idempotency-Key, 422 for the key reused on another resend; 409 while the
delivery is sent or its endpoint is disabled), and another tenant's message or endpoint
answering 404."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.models import Delivery, Notification, WebhookEndpoint
from tenancy.quotas import period_of, usage
from tests.delivery.factories import make_endpoint
from webhooks.event_types import event_type_create
from webhooks.messages import MAX_PAYLOAD_BYTES
from webhooks.models import PRODUCT_EVENT_TYPES, Message

pytestmark = pytest.mark.usefixtures("public_dns")

URL = "https://hooks.example.com/in"


@pytest.fixture(autouse=True)
def _order_shipped(alice, charlie):
    """A type of each tenant's own: the product's types are the product's to publish."""
    for actor in (alice, charlie):
        event_type_create(tenant=actor.tenant, name="order.shipped")


def _publish(actor, body, key=None):
    return actor.client().post(
        "/v1/messages",
        body,
        format="json",
        headers={"Idempotency-Key": key or str(uuid.uuid4())},
    )


def test_an_endpoint_subscribes_through_the_api_and_unknown_types_are_400(alice):
    event_type_create(tenant=alice.tenant, name="invoice.paid")
    archived = event_type_create(tenant=alice.tenant, name="old.type")
    archived.archived = True
    archived.save()
    client = alice.client()

    created = client.post(
        "/v1/webhook-endpoints", {"url": URL, "event_types": ["invoice.paid"]}, format="json"
    )
    assert created.status_code == 201
    assert created.json()["event_types"] == ["invoice.paid"]
    path = f"/v1/webhook-endpoints/{created.json()['id']}"
    for names in (["nope"], ["old.type"], ["invoice.paid", "nope"]):
        refused = client.patch(path, {"event_types": names}, format="json")
        assert refused.status_code == 400
        assert "event_types" in refused.json()["errors"]
    assert client.get(path).json()["event_types"] == ["invoice.paid"]
    assert client.patch(path, {"event_types": None}, format="json").json()["event_types"] is None
    before = WebhookEndpoint.objects.count()
    refused = client.post(
        "/v1/webhook-endpoints", {"url": URL, "event_types": ["nope"]}, format="json"
    )
    assert refused.status_code == 400
    assert WebhookEndpoint.objects.count() == before


def test_publish_answers_202_with_the_endpoints_it_queued_to(alice):
    event_type_create(tenant=alice.tenant, name="invoice.paid")
    everything = make_endpoint(tenant=alice.tenant, url=URL)
    paid = make_endpoint(tenant=alice.tenant, url=URL, event_types=["invoice.paid"])
    make_endpoint(tenant=alice.tenant, url=URL, event_types=["order.shipped"])

    response = _publish(alice, {"event_type": "invoice.paid", "payload": {"amount": 5}})

    assert response.status_code == 202
    body = response.json()
    assert set(body) == {
        *("id", "application", "event_type", "event_id", "payload", "created_at", "endpoints")
    }
    assert body["application"] is None
    assert set(body["endpoints"]) == {str(everything.id), str(paid.id)}
    assert response["Location"] == f"/v1/messages/{body['id']}"
    assert Notification.objects.filter(message_id=body["id"]).count() == 2


def test_publish_requires_an_idempotency_key_and_replays_it(alice):
    make_endpoint(tenant=alice.tenant, url=URL)
    body = {"event_type": "order.shipped", "payload": {}}
    missing = alice.client().post("/v1/messages", body, format="json")
    assert missing.status_code == 400

    first = _publish(alice, body, key="k-1")
    replay = _publish(alice, body, key="k-1")

    assert replay.status_code == 202
    assert replay.content == first.content
    assert replay["Idempotent-Replayed"] == "true"
    assert Message.objects.count() == 1
    assert Notification.objects.count() == 1


def test_a_repeated_event_id_answers_the_first_message(alice):
    make_endpoint(tenant=alice.tenant, url=URL)
    first = _publish(alice, {"event_type": "order.shipped", "payload": {}, "event_id": "e1"})
    again = _publish(alice, {"event_type": "order.shipped", "payload": {}, "event_id": "e1"})

    assert again.status_code == 202
    assert again.json()["id"] == first.json()["id"]
    assert Notification.objects.count() == 1


@pytest.mark.parametrize(
    "body",
    [
        {"event_type": "nope", "payload": {}},
        {"event_type": "order.shipped", "payload": []},
        {"event_type": "order.shipped", "payload": "x"},
        {"event_type": "order.shipped"},
        {"event_type": 5, "payload": {}},
        {"event_type": "order.shipped", "payload": {}, "id": str(uuid.uuid4())},
    ],
)
def test_bad_input_is_400_and_writes_nothing(alice, body):
    make_endpoint(tenant=alice.tenant, url=URL)
    response = _publish(alice, body)
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert not Message.objects.exists()
    assert not Notification.objects.exists()


def test_a_payload_over_256_kib_is_a_payload_too_large_problem(alice):
    big = {"x": "a" * MAX_PAYLOAD_BYTES}
    response = _publish(alice, {"event_type": "order.shipped", "payload": big})
    assert response.status_code == 400
    assert response.json()["type"].endswith("/payload-too-large")
    assert not Message.objects.exists()


def test_list_filters_by_event_type_and_since(alice, bob):
    event_type_create(tenant=alice.tenant, name="invoice.paid")
    old = _publish(alice, {"event_type": "invoice.paid", "payload": {}}).json()
    Message.objects.filter(pk=old["id"]).update(created_at=timezone.now() - timedelta(days=2))
    paid = _publish(alice, {"event_type": "invoice.paid", "payload": {}}).json()
    active = _publish(bob, {"event_type": "order.shipped", "payload": {}}).json()
    client = bob.client()

    def ids(query):
        response = client.get(f"/v1/messages{query}")
        assert response.status_code == 200
        return [row["id"] for row in response.json()["results"]]

    assert ids("") == [active["id"], paid["id"], old["id"]]
    assert ids("?event_type=invoice.paid") == [paid["id"], old["id"]]
    since = (timezone.now() - timedelta(days=1)).isoformat().replace("+00:00", "Z")
    assert ids(f"?event_type=invoice.paid&since={since}") == [paid["id"]]
    assert client.get("/v1/messages?kind=x").status_code == 400
    assert client.get(f"/v1/messages/{paid['id']}").json() == paid


def test_endpoints_and_resend_through_the_api(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url=URL)
    message = _publish(alice, {"event_type": "order.shipped", "payload": {}}).json()
    row = Notification.objects.get(message_id=message["id"])
    Delivery.objects.create(
        tenant=alice.tenant,
        notification_id=row.id,
        endpoint_id=endpoint.id,
        occurrence=1,
        channel="webhook",
        outcome="failed",
        http_status=503,
    )

    endpoints = alice.client().get(f"/v1/messages/{message['id']}/endpoints")

    assert endpoints.status_code == 200
    [entry] = endpoints.json()["results"]
    assert (entry["endpoint_id"], entry["notification_id"]) == (str(endpoint.id), str(row.id))
    assert (entry["status"], entry["attempts"], entry["last_outcome"]) == ("pending", 1, "failed")
    assert entry["last_http_status"] == 503

    resent = alice.client().post(
        f"/v1/messages/{message['id']}/endpoints/{endpoint.id}/resend", format="json"
    )
    assert resent.status_code == 202
    assert resent.json()["endpoint_id"] == str(endpoint.id)
    assert resent.json()["notification_id"] == str(row.id)
    # Still on its way: brought forward, not queued a second time.
    assert Notification.objects.filter(message_id=message["id"]).count() == 1
    assert resent.json()["status"] == "pending"


def _resend_path(message, endpoint):
    return f"/v1/messages/{message['id']}/endpoints/{endpoint.id}/resend"


def test_a_resend_with_an_idempotency_key_runs_once(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url=URL)
    message = _publish(alice, {"event_type": "order.shipped", "payload": {}}).json()
    Notification.objects.filter(message_id=message["id"]).update(
        state="completed", next_fire_at=None, due_at=None
    )
    key = {"Idempotency-Key": str(uuid.uuid4())}

    first = alice.client().post(_resend_path(message, endpoint), headers=key)
    replay = alice.client().post(_resend_path(message, endpoint), headers=key)

    assert first.status_code == replay.status_code == 202
    assert replay["Idempotent-Replayed"] == "true"
    assert replay.content == first.content
    assert Notification.objects.filter(message_id=message["id"]).count() == 2
    assert usage(alice.tenant.id, "messages_per_month", period_of(timezone.now())) == 2


def test_a_resend_key_reused_for_another_endpoint_is_a_422_that_sends_nothing(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url=URL)
    other = make_endpoint(tenant=alice.tenant, url=URL)
    message = _publish(alice, {"event_type": "order.shipped", "payload": {}}).json()
    rows = Notification.objects.filter(message_id=message["id"])
    rows.update(state="completed", next_fire_at=None, due_at=None)
    key = {"Idempotency-Key": str(uuid.uuid4())}

    first = alice.client().post(_resend_path(message, endpoint), headers=key)
    reused = alice.client().post(_resend_path(message, other), headers=key)

    assert first.status_code == 202
    assert reused.status_code == 422
    assert reused.json()["type"].endswith("/idempotency-key-reused")
    assert rows.filter(webhook_endpoint=other).count() == 1
    assert rows.filter(webhook_endpoint=endpoint).count() == 2
    assert usage(alice.tenant.id, "messages_per_month", period_of(timezone.now())) == 2


def test_a_resend_while_the_delivery_is_being_sent_is_a_409(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url=URL)
    message = _publish(alice, {"event_type": "order.shipped", "payload": {}}).json()
    rows = Notification.objects.filter(message_id=message["id"])
    rows.update(claimed_until=timezone.now() + timedelta(minutes=5))
    before = rows.values().get()

    response = alice.client().post(_resend_path(message, endpoint))

    assert response.status_code == 409
    assert response.json()["type"].endswith("/notification-claimed")
    assert rows.values().get() == before


def test_a_resend_to_a_disabled_endpoint_is_a_409(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url=URL)
    message = _publish(alice, {"event_type": "order.shipped", "payload": {}}).json()
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(enabled=False)

    response = alice.client().post(_resend_path(message, endpoint))

    assert response.status_code == 409
    assert response.json()["type"].endswith("/webhook-endpoint-disabled")
    assert "resend" in response.json()["detail"]


def test_another_tenant_s_message_or_endpoint_is_404(alice, charlie):
    mine = make_endpoint(tenant=alice.tenant, url=URL)
    theirs = make_endpoint(tenant=charlie.tenant, url=URL)
    message = _publish(alice, {"event_type": "order.shipped", "payload": {}}).json()
    their_message = _publish(charlie, {"event_type": "order.shipped", "payload": {}}).json()
    client = alice.client()

    for path in (
        f"/v1/messages/{their_message['id']}",
        f"/v1/messages/{their_message['id']}/attempts",
        f"/v1/messages/{their_message['id']}/endpoints",
    ):
        assert client.get(path).status_code == 404
    for message_id, endpoint_id in (
        (message["id"], theirs.id),
        (their_message["id"], mine.id),
        (their_message["id"], theirs.id),
    ):
        response = client.post(f"/v1/messages/{message_id}/endpoints/{endpoint_id}/resend")
        assert response.status_code == 404
        assert str(theirs.id) not in response.content.decode()
    assert Notification.objects.count() == 2


@pytest.mark.parametrize("event_type", sorted(PRODUCT_EVENT_TYPES))
def test_the_product_s_own_event_types_are_403_for_owners_and_members(alice, bob, event_type):
    make_endpoint(tenant=alice.tenant, url=URL, event_types=[event_type])

    for actor in (alice, bob):
        response = _publish(actor, {"event_type": event_type, "payload": {"forged": True}})

        assert response.status_code == 403
        problem = response.json()
        assert problem["type"].endswith("/product-event-type-reserved")
        assert event_type in problem["detail"]
    assert not Message.objects.filter(tenant=alice.tenant).exists()
    assert not Notification.objects.filter(tenant=alice.tenant).exists()
