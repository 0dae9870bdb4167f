"""The recipients API: PUT creates or replaces, GET, DELETE, the list; preferences; and
notifications that name recipients and a category."""

import uuid

import pytest

from delivery.models import Notification
from people.models import Recipient

ADA = {"email": "ada@example.com", "name": "Ada", "timezone": "Europe/Berlin"}
WINDOW = {"days": ["MO", "TU"], "from": "09:00", "until": "17:00"}


def put(actor, key, body):
    return actor.client().put(f"/v1/recipients/{key}", body, format="json")


def test_put_creates_then_replaces(alice):
    created = put(alice, "user-42", {**ADA, "send_window": WINDOW})

    assert created.status_code == 201
    assert created["Location"] == "/v1/recipients/user-42"
    body = created.json()
    assert (body["id"], body["email"], body["timezone"]) == (
        "user-42",
        "ada@example.com",
        "Europe/Berlin",
    )
    assert body["send_window"] == WINDOW

    replaced = put(alice, "user-42", {"email": "ada@new.example.com"})

    assert replaced.status_code == 200
    assert replaced.json()["email"] == "ada@new.example.com"
    # A replacement: what the body leaves out goes back to its default.
    assert (replaced.json()["name"], replaced.json()["timezone"]) == ("", "UTC")
    assert replaced.json()["send_window"] is None
    assert Recipient.objects.filter(tenant=alice.tenant).count() == 1


def test_get_list_and_delete(alice):
    put(alice, "a", ADA)
    put(alice, "b@example.com", {"email": "b@example.com"})
    client = alice.client()

    assert client.get("/v1/recipients/a").json()["name"] == "Ada"
    listed = client.get("/v1/recipients")
    assert [r["id"] for r in listed.json()["results"]] == ["b@example.com", "a"]
    filtered = client.get("/v1/recipients?email=ada@example.com")
    assert [r["id"] for r in filtered.json()["results"]] == ["a"]
    assert client.get("/v1/recipients?colour=red").status_code == 400

    assert client.delete("/v1/recipients/a").status_code == 204
    assert client.get("/v1/recipients/a").status_code == 404
    assert client.delete("/v1/recipients/a").status_code == 404


def test_another_tenants_recipient_answers_like_a_missing_one(alice, charlie):
    put(alice, "shared-key", ADA)

    for method in ("get", "delete"):
        response = getattr(charlie.client(), method)("/v1/recipients/shared-key")
        assert response.status_code == 404
    assert charlie.client().get("/v1/recipients").json()["results"] == []
    # The same key in another tenant is another person.
    assert put(charlie, "shared-key", {"email": "c@example.com"}).status_code == 201
    assert Recipient.objects.get(tenant=alice.tenant).email == "ada@example.com"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"email": "not an address"}, "email"),
        ({"email": "a" * 245 + "@example.com"}, "email"),
        ({"email": "a@example.com", "timezone": "Mars/Olympus"}, "timezone"),
        ({"email": "a@example.com", "timezone": "localtime"}, "timezone"),
        (
            {"email": "a@example.com", "send_window": {"days": ["XX"], "from": "9", "until": "x"}},
            "send_window",
        ),
        ({"email": "a@example.com", "preferences": {}}, "preferences"),
        ({"email": "a@example.com", "id": "other"}, "id"),
        ({}, "email"),
    ],
)
def test_bad_input_is_400_and_writes_nothing(alice, body, field):
    response = put(alice, "k", body)

    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert not Recipient.objects.exists()


def test_an_id_longer_than_255_characters_is_refused(alice):
    assert put(alice, "k" * 256, ADA).status_code == 400
    assert put(alice, "k" * 255, ADA).status_code == 201


def test_preferences_put_and_get(alice):
    put(alice, "a", ADA)
    client = alice.client()
    prefs = {
        "channels": {"email": True, "webhook": False},
        "categories": {"marketing": {"email": False}},
    }

    response = client.put("/v1/recipients/a/preferences", prefs, format="json")

    assert response.status_code == 200
    assert response.json() == prefs
    assert client.get("/v1/recipients/a/preferences").json() == prefs
    assert client.get("/v1/recipients/a").json()["preferences"] == prefs
    # A profile replacement keeps them.
    put(alice, "a", {"email": "ada@example.com"})
    assert client.get("/v1/recipients/a/preferences").json() == prefs


@pytest.mark.parametrize(
    "prefs",
    [
        {"channels": {"email": "no"}},
        {"channels": {"sms": False}},
        {"categories": {"bad name!": {"email": False}}},
        {"categories": {"ok": {"email": 0}}},
        {"other": {}},
    ],
)
def test_bad_preferences_are_400(alice, prefs):
    put(alice, "a", ADA)

    response = alice.client().put("/v1/recipients/a/preferences", prefs, format="json")

    assert response.status_code == 400
    assert Recipient.objects.get().preferences == {}


def test_preferences_of_a_missing_or_foreign_recipient_are_404(alice, charlie):
    put(alice, "a", ADA)
    body = {"channels": {"email": False}}
    assert (
        charlie.client().put("/v1/recipients/a/preferences", body, format="json").status_code == 404
    )
    assert charlie.client().get("/v1/recipients/a/preferences").status_code == 404


def create_notification(actor, **fields):
    body = {"channels": ["email"], "subject": "S", "body": "B", **fields}
    return actor.client().post(
        "/v1/notifications", body, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())
    )


def test_a_notification_may_name_recipients_and_a_category(alice):
    put(alice, "a", ADA)

    response = create_notification(alice, recipients=["a"], category="billing")

    assert response.status_code == 201, response.json()
    assert (response.json()["recipients"], response.json()["category"]) == (["a"], "billing")
    row = Notification.objects.get()
    assert (row.recipients, row.category, row.email_to) == (["a"], "billing", [])


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"recipients": ["nobody"]}, "recipients"),
        ({"recipients": ["a"], "email_to": ["x@example.com"]}, "recipients"),
        ({"recipients": ["a", "a"]}, "recipients"),
        ({"recipients": ["a"], "category": "no spaces"}, "category"),
        ({}, "email_to"),
    ],
)
def test_bad_recipients_are_400(alice, fields, field):
    put(alice, "a", ADA)

    response = create_notification(alice, **fields)

    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert not Notification.objects.exists()


def test_another_tenants_recipient_cannot_be_named(alice, charlie):
    put(alice, "a", ADA)

    response = create_notification(charlie, recipients=["a"])

    assert response.status_code == 400
    assert "recipients" in response.json()["errors"]
