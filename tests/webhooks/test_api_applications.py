"""/v1/applications through the API, and endpoints and messages addressed to one: create
(409 `application-exists` for a live uid; replayed by Idempotency-Key), list by uid, read and
change by id or uid, delete (404 after, uid free again), an endpoint's application fixed at
create, `?application=` on endpoints and messages, and another tenant's application 404."""

import uuid

import pytest

from delivery.models import WebhookEndpoint
from webhooks.event_types import event_type_create
from webhooks.models import Application, Message

pytestmark = pytest.mark.usefixtures("public_dns")

URL = "https://hooks.example.com/in"


@pytest.fixture(autouse=True)
def _invoice_paid(alice):
    event_type_create(tenant=alice.tenant, name="invoice.paid")


def _post(actor, path, body, key=None):
    return actor.client().post(
        path, body, format="json", headers={"Idempotency-Key": key or str(uuid.uuid4())}
    )


def _create(actor, uid="acme", **fields):
    response = _post(actor, "/v1/applications", {"uid": uid, "name": "Acme", **fields})
    assert response.status_code == 201, response.content
    return response.json()


def test_create_answers_201_with_location_and_replays_by_idempotency_key(alice):
    body = {"uid": "acme", "name": "Acme", "metadata": {"plan": "gold"}}

    first = _post(alice, "/v1/applications", body, key="k-1")
    replay = _post(alice, "/v1/applications", body, key="k-1")

    assert first.status_code == replay.status_code == 201
    created = first.json()
    assert set(created) == {"id", "uid", "name", "metadata", "created_at", "updated_at"}
    assert created["metadata"] == {"plan": "gold"}
    assert first["Location"] == f"/v1/applications/{created['id']}"
    assert replay.content == first.content
    assert replay["Idempotent-Replayed"] == "true"
    assert Application.objects.filter(tenant=alice.tenant).count() == 1


def test_a_repeated_uid_is_409_application_exists(alice):
    _create(alice)

    response = _post(alice, "/v1/applications", {"uid": "acme", "name": "Again"})

    assert response.status_code == 409
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["type"].endswith("/application-exists")


@pytest.mark.parametrize(
    "body",
    [
        {"uid": "a b", "name": "A"},
        {"uid": "x" * 257, "name": "A"},
        {"name": "A"},
        {"uid": "a"},
        {"uid": "a", "name": "A", "metadata": {"n": 1}},
        {"uid": "a", "name": "A", "id": str(uuid.uuid4())},
    ],
)
def test_bad_bodies_are_400_and_create_nothing(alice, body):
    response = _post(alice, "/v1/applications", body)

    assert response.status_code == 400, response.content
    assert not Application.objects.exists()


def test_read_change_and_delete_by_id_or_uid(alice):
    created = _create(alice)
    client = alice.client()

    assert client.get("/v1/applications/acme").json() == created
    assert client.get(f"/v1/applications/{created['id']}").json() == created
    listed = client.get("/v1/applications?uid=acme").json()["results"]
    assert [row["id"] for row in listed] == [created["id"]]
    assert client.get("/v1/applications?uid=nobody").json()["results"] == []
    assert client.get("/v1/applications?uid=a%20b").status_code == 400

    patched = client.patch("/v1/applications/acme", {"name": "Acme Inc."}, format="json")
    assert patched.status_code == 200
    assert patched.json()["name"] == "Acme Inc."
    assert client.patch("/v1/applications/acme", {"id": "x"}, format="json").status_code == 400

    assert client.delete("/v1/applications/acme").status_code == 204
    assert client.get("/v1/applications/acme").status_code == 404
    assert client.get(f"/v1/applications/{created['id']}").status_code == 404
    assert client.delete(f"/v1/applications/{created['id']}").status_code == 404
    assert client.get("/v1/applications").json()["results"] == []
    assert _create(alice)["id"] != created["id"]


def test_another_tenant_s_application_is_404_and_unusable(alice, charlie):
    theirs = _create(charlie, uid="theirs")
    client = alice.client()

    assert client.get(f"/v1/applications/{theirs['id']}").status_code == 404
    assert client.get("/v1/applications/theirs").status_code == 404
    endpoint = _post(alice, "/v1/webhook-endpoints", {"url": URL, "application": theirs["id"]})
    message = _post(
        alice,
        "/v1/messages",
        {"event_type": "invoice.paid", "payload": {}, "application": "theirs"},
    )

    assert endpoint.status_code == message.status_code == 400
    assert "application" in endpoint.json()["errors"]
    assert "application" in message.json()["errors"]


def test_endpoints_and_messages_name_their_application_by_its_id(alice):
    acme = _create(alice)
    _create(alice, uid="globex")
    client = alice.client()

    endpoint = _post(alice, "/v1/webhook-endpoints", {"url": URL, "application": "acme"})
    own = _post(alice, "/v1/webhook-endpoints", {"url": URL})
    message = _post(
        alice,
        "/v1/messages",
        {"event_type": "invoice.paid", "payload": {}, "application": "acme"},
    )

    assert endpoint.status_code == own.status_code == 201
    assert endpoint.json()["application"] == acme["id"]
    assert own.json()["application"] is None
    assert message.status_code == 202
    assert message.json()["application"] == acme["id"]
    assert message.json()["endpoints"] == [endpoint.json()["id"]]
    for key in ("acme", acme["id"]):
        endpoints = client.get(f"/v1/webhook-endpoints?application={key}").json()["results"]
        assert [row["id"] for row in endpoints] == [endpoint.json()["id"]]
        messages = client.get(f"/v1/messages?application={key}").json()["results"]
        assert [row["id"] for row in messages] == [message.json()["id"]]
    assert client.get("/v1/webhook-endpoints?application=globex").json()["results"] == []
    assert client.get("/v1/messages?application=nobody").json()["results"] == []
    assert client.get("/v1/messages?application=a%00b").status_code == 400


def test_an_endpoint_s_application_cannot_be_changed(alice):
    _create(alice)
    _create(alice, uid="globex")
    endpoint = _post(alice, "/v1/webhook-endpoints", {"url": URL, "application": "acme"}).json()

    response = alice.client().patch(
        f"/v1/webhook-endpoints/{endpoint['id']}", {"application": "globex"}, format="json"
    )

    assert response.status_code == 400
    assert "application" in response.json()["errors"]
    stored = WebhookEndpoint.objects.get(pk=endpoint["id"])
    assert str(stored.application_id) == endpoint["application"]


def test_deleting_disables_the_endpoints_and_keeps_the_messages(alice):
    acme = _create(alice)
    endpoint = _post(alice, "/v1/webhook-endpoints", {"url": URL, "application": "acme"}).json()
    message = _post(
        alice,
        "/v1/messages",
        {"event_type": "invoice.paid", "payload": {}, "application": "acme"},
    ).json()
    client = alice.client()

    assert client.delete("/v1/applications/acme").status_code == 204

    shown = client.get(f"/v1/webhook-endpoints/{endpoint['id']}").json()
    assert (shown["disabled"], shown["disabled_reason"]) == (True, "application_deleted")
    enabling = client.patch(
        f"/v1/webhook-endpoints/{endpoint['id']}", {"disabled": False}, format="json"
    )
    assert enabling.status_code == 409
    assert enabling.json()["type"].endswith("/application-deleted")
    assert client.get(f"/v1/messages/{message['id']}").json()["application"] == acme["id"]
    history = client.get(f"/v1/messages?application={acme['id']}").json()["results"]
    assert [row["id"] for row in history] == [message["id"]]
    assert Message.objects.filter(application_id=acme["id"]).count() == 1
