"""/v1/webhook-endpoints: owner-only CRUD, URL vetting and secret rotation."""

import socket
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from delivery.models import WebhookEndpoint
from tests.delivery.factories import make_endpoint

PUBLIC = "93.184.216.34"
URL = "https://hooks.example.com/tickwork"


@pytest.fixture(autouse=True)
def fake_dns(monkeypatch):
    """Hostnames resolve from this table only; nothing reaches a real resolver."""
    table = {"hooks.example.com": PUBLIC, "intranet.example.com": "10.1.2.3"}

    def getaddrinfo(host, port, *args, **kwargs):
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (table[host], port or 443))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def test_a_description_is_kept_shown_and_changed(alice):
    client = alice.client()
    created = client.post(
        "/v1/webhook-endpoints", {"url": URL, "description": "Orders to the ERP"}, format="json"
    )
    path = f"/v1/webhook-endpoints/{created.json()['id']}"
    changed = client.patch(path, {"description": "Orders and refunds"}, format="json")
    too_long = client.patch(path, {"description": "x" * 501}, format="json")

    assert created.status_code == 201
    assert created.json()["description"] == "Orders to the ERP"
    assert changed.status_code == 200
    assert client.get(path).json()["description"] == "Orders and refunds"
    assert too_long.status_code == 400
    assert "description" in too_long.json()["errors"]
    assert WebhookEndpoint.objects.get().description == "Orders and refunds"


def test_create_returns_the_secret_once(alice):
    response = alice.client().post("/v1/webhook-endpoints", {"url": URL}, format="json")

    assert response.status_code == 201
    body = response.json()
    assert set(body) == {
        *("id", "url", "enabled", "disabled", "disabled_reason", "created_at", "health"),
        *("event_types", "rate_limit", "secret", "application", "description"),
    }
    assert (body["disabled"], body["disabled_reason"], body["description"]) == (False, None, "")
    assert body["health"] == {
        "state": "healthy",
        "consecutive_failures": 0,
        "open_until": None,
        "last_failure_at": None,
    }
    assert body["secret"].startswith("whsec_")
    assert response["Location"] == f"/v1/webhook-endpoints/{body['id']}"
    row = WebhookEndpoint.objects.get(pk=body["id"])
    assert (row.tenant, row.secret, row.enabled) == (alice.tenant, body["secret"], True)
    detail = alice.client().get(f"/v1/webhook-endpoints/{body['id']}")
    listed = alice.client().get("/v1/webhook-endpoints")
    assert "secret" not in detail.json()
    assert body["secret"] not in detail.content.decode() + listed.content.decode()


@pytest.mark.parametrize(
    ("url", "message_part"),
    [
        ("http://hooks.example.com/x", "https"),
        ("https://127.0.0.1/x", ""),
        ("https://169.254.169.254/latest", ""),
        ("https://[::ffff:127.0.0.1]/x", ""),
        ("https://intranet.example.com/x", ""),
        ("https://nowhere.invalid/x", ""),
        ("not a url", ""),
        ("", ""),
        ("https://hooks.example.com:0/x", "port must be a number from 1 to 65535"),
        ("https://hooks.example.com:00000/x", "port must be a number from 1 to 65535"),
        ("https://hooks.example.com:65536/x", "port must be a number from 1 to 65535"),
        ("https://hooks.example.com:99999/x", "port must be a number from 1 to 65535"),
    ],
)
def test_unsafe_urls_are_400_with_a_message(alice, url, message_part):
    response = alice.client().post("/v1/webhook-endpoints", {"url": url}, format="json")

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    message = " ".join(response.json()["errors"]["url"])
    assert message_part in message
    assert not WebhookEndpoint.objects.exists()


def test_port_0_is_refused_by_patch_too_and_the_url_is_kept(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url=URL)

    response = alice.client().patch(
        f"/v1/webhook-endpoints/{endpoint.id}",
        {"url": "https://hooks.example.com:0/"},
        format="json",
    )

    assert response.status_code == 400
    assert "port" in response.json()["errors"]["url"][0]
    endpoint.refresh_from_db()
    assert endpoint.url == URL


def test_private_targets_are_allowed_when_configured(alice, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True

    response = alice.client().post(
        "/v1/webhook-endpoints", {"url": "http://127.0.0.1:8080/in"}, format="json"
    )

    assert response.status_code == 201


def test_list_is_newest_first_and_tenant_scoped(alice, charlie):
    old = make_endpoint(tenant=alice.tenant, url=URL)
    WebhookEndpoint.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(1))
    new = make_endpoint(tenant=alice.tenant, url=URL + "/2")
    make_endpoint(tenant=charlie.tenant, url=URL + "/b")

    response = alice.client().get("/v1/webhook-endpoints")

    assert response.status_code == 200
    assert [e["id"] for e in response.json()["results"]] == [str(new.id), str(old.id)]


def test_patch_changes_url_and_enabled_and_vets_the_url(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url=URL)
    path = f"/v1/webhook-endpoints/{endpoint.id}"
    client = alice.client()

    changed = client.patch(path, {"url": URL + "/v2", "enabled": False}, format="json")
    unsafe = client.patch(path, {"url": "https://10.0.0.1/"}, format="json")

    assert changed.status_code == 200
    assert changed.json() == {**changed.json(), "url": URL + "/v2", "enabled": False}
    assert "secret" not in changed.json()
    assert unsafe.status_code == 400
    endpoint.refresh_from_db()
    assert (endpoint.url, endpoint.enabled) == (URL + "/v2", False)


def test_reenabling_clears_the_disabled_reason(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url=URL, enabled=False)
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(disabled_reason="410 Gone")

    response = alice.client().patch(
        f"/v1/webhook-endpoints/{endpoint.id}", {"enabled": True}, format="json"
    )

    assert response.status_code == 200
    endpoint.refresh_from_db()
    assert (endpoint.enabled, endpoint.disabled_reason) == (True, "")


def test_rotate_secret_keeps_the_previous_one_for_the_grace_period(alice, settings):
    settings.WEBHOOK_SECRET_GRACE_SECONDS = 600
    endpoint = make_endpoint(tenant=alice.tenant, url=URL)
    before = timezone.now()

    response = alice.client().post(f"/v1/webhook-endpoints/{endpoint.id}/rotate-secret")

    assert response.status_code == 200
    new_secret = response.json()["secret"]
    old_secret = endpoint.secret
    endpoint.refresh_from_db()
    assert new_secret.startswith("whsec_") and new_secret != old_secret
    [retired] = endpoint.retired_secrets
    assert (endpoint.secret, retired["secret"]) == (new_secret, old_secret)
    grace_end = datetime.fromisoformat(retired["until"])
    assert before + timedelta(seconds=600) <= grace_end <= timezone.now() + timedelta(seconds=600)
    assert endpoint.signing_secrets(now=timezone.now()) == [new_secret, old_secret]
    assert endpoint.signing_secrets(now=grace_end) == [new_secret]


def test_delete_removes_the_endpoint(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url=URL)
    path = f"/v1/webhook-endpoints/{endpoint.id}"

    assert alice.client().delete(path).status_code == 204
    assert not WebhookEndpoint.objects.filter(pk=endpoint.pk).exists()
    assert alice.client().get(path).status_code == 404


def test_member_gets_403_on_every_route(alice, bob):
    endpoint = make_endpoint(tenant=alice.tenant, url=URL)
    path = f"/v1/webhook-endpoints/{endpoint.id}"
    client = bob.client()

    statuses = {
        client.get("/v1/webhook-endpoints").status_code,
        client.post("/v1/webhook-endpoints", {"url": URL}, format="json").status_code,
        client.get(path).status_code,
        client.patch(path, {"enabled": False}, format="json").status_code,
        client.delete(path).status_code,
        client.post(f"{path}/rotate-secret").status_code,
    }

    assert statuses == {403}
    endpoint.refresh_from_db()
    assert endpoint.enabled
    assert WebhookEndpoint.objects.count() == 1


@pytest.mark.parametrize(
    "body",
    [
        [],
        "x",
        {"url": None},
        {"url": 5},
        {"url": "https://" + "a" * 3000},
        {"enabled": "maybe"},
        {"url": "https://hooks.example.com/\x00"},
    ],
)
def test_junk_is_a_4xx_problem(alice, body):
    response = alice.client().post("/v1/webhook-endpoints", body, format="json")

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"


@pytest.mark.parametrize("enabled", [0, 1, "yes", "true", None])
def test_enabled_must_be_a_json_boolean(alice, enabled):
    response = alice.client().post(
        "/v1/webhook-endpoints", {"url": URL, "enabled": enabled}, format="json"
    )

    assert response.status_code == 400
    assert "enabled" in response.json()["errors"]
    assert not WebhookEndpoint.objects.exists()
