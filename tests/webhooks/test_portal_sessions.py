"""POST /v1/applications/{id}/portal-sessions and DELETE /v1/portal-sessions/{id}: owners
only, the token shown once and kept as a digest, its lifetime bounded, revocation and expiry
ending it at once (401)."""

import hashlib
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.webhooks.portal_support import make_application, portal_client
from webhooks.models import PortalSession

ALL = ["view", "manage_endpoints", "view_secret", "rotate_secret", "resend"]


def _create(actor, application_key, body=None, key=None):
    headers = {"Idempotency-Key": key} if key else {}
    return actor.client().post(
        f"/v1/applications/{application_key}/portal-sessions",
        body or {},
        format="json",
        headers=headers,
    )


def test_an_owner_gets_a_link_whose_token_is_shown_once_and_kept_as_a_digest(alice, settings):
    settings.PORTAL_URL = "https://api.example.com/portal/#token={token}"
    application = make_application(alice.tenant, "acme")

    response = _create(alice, "acme")

    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"id", "url", "token", "expires_at"}
    token = body["token"]
    assert token.startswith("tkp_")
    assert body["url"] == f"https://api.example.com/portal/#token={token}"
    assert response["Location"] == f"/v1/portal-sessions/{body['id']}"
    session = PortalSession.objects.get(pk=body["id"])
    assert session.application == application
    assert session.capabilities == ALL
    assert session.digest == hashlib.sha256(token.encode()).hexdigest()
    stored = [str(value) for value in PortalSession.objects.values_list().get(pk=session.pk)]
    assert token not in " ".join(stored)
    lifetime = session.expires_at - session.created_at
    assert lifetime == timedelta(seconds=3600)


def test_the_application_is_named_by_uuid_or_uid_and_another_tenant_s_is_404(alice, charlie):
    application = make_application(alice.tenant, "acme")
    theirs = make_application(charlie.tenant, "globex")

    assert _create(alice, application.id).status_code == 201
    assert _create(alice, "acme").status_code == 201
    for key in (theirs.id, "globex", uuid.uuid4(), "nobody"):
        response = _create(alice, key)
        assert response.status_code == 404, key
        assert response["Content-Type"] == "application/problem+json"
    assert not PortalSession.objects.filter(tenant=charlie.tenant).exists()


def test_a_member_may_not_make_a_session(alice, bob):
    make_application(alice.tenant, "acme")

    response = _create(bob, "acme")

    assert response.status_code == 403
    assert not PortalSession.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"expires_in": 59}, "expires_in"),
        ({"expires_in": 7 * 86_400 + 1}, "expires_in"),
        ({"expires_in": "3600"}, "expires_in"),
        ({"capabilities": ["view", "admin"]}, "capabilities"),
        ({"capabilities": "view"}, "capabilities"),
        ({"application": "other"}, "application"),
    ],
)
def test_bad_bodies_are_400_naming_the_field(alice, body, field):
    make_application(alice.tenant, "acme")

    response = _create(alice, "acme", body)

    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert not PortalSession.objects.exists()


def test_capabilities_always_include_view_and_the_bounds_are_accepted(alice):
    make_application(alice.tenant, "acme")

    shortest = _create(alice, "acme", {"capabilities": [], "expires_in": 60}).json()
    longest = _create(alice, "acme", {"capabilities": ["resend"], "expires_in": 604_800}).json()

    assert PortalSession.objects.get(pk=shortest["id"]).capabilities == ["view"]
    assert PortalSession.objects.get(pk=longest["id"]).capabilities == ["view", "resend"]


def test_a_repeated_idempotency_key_does_not_show_the_token_again(alice):
    make_application(alice.tenant, "acme")

    first = _create(alice, "acme", key="k-1")
    again = _create(alice, "acme", key="k-1")

    assert first.status_code == 201
    assert again.status_code == 409
    assert first.json()["token"] not in again.content.decode()
    assert PortalSession.objects.count() == 1


def test_revoking_stops_the_token_at_once_and_only_the_owner_of_its_tenant_may(alice, bob, charlie):
    make_application(alice.tenant, "acme")
    created = _create(alice, "acme").json()
    portal = portal_client(created["token"])
    assert portal.get("/v1/webhook-endpoints").status_code == 200
    path = f"/v1/portal-sessions/{created['id']}"

    assert bob.client().delete(path).status_code == 403
    assert charlie.client().delete(path).status_code == 404
    assert portal.get("/v1/webhook-endpoints").status_code == 200
    assert alice.client().delete(path).status_code == 204

    refused = portal.get("/v1/webhook-endpoints")
    assert refused.status_code == 401
    assert refused["WWW-Authenticate"].startswith("Bearer")
    assert alice.client().delete(path).status_code == 204  # already revoked: nothing changes
    assert alice.client().delete(f"/v1/portal-sessions/{uuid.uuid4()}").status_code == 404


def test_an_expired_session_is_401(alice):
    make_application(alice.tenant, "acme")
    created = _create(alice, "acme").json()
    PortalSession.objects.filter(pk=created["id"]).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    response = portal_client(created["token"]).get("/v1/webhook-endpoints")

    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"


def test_a_deleted_application_s_session_is_401(alice):
    application = make_application(alice.tenant, "acme")
    created = _create(alice, "acme").json()
    application.deleted_at = timezone.now()
    application.save()

    assert portal_client(created["token"]).get("/v1/webhook-endpoints").status_code == 401


@pytest.mark.parametrize(
    "mangle",
    [
        lambda token: token[:-1] + ("A" if token[-1] != "A" else "B"),  # checksum broken
        lambda token: "tkp_" + "0" * 40 + "_" + token[-6:],
        lambda token: token.replace("tkp_", "tkw_"),
    ],
)
def test_a_made_up_or_altered_portal_token_is_401(alice, mangle):
    make_application(alice.tenant, "acme")
    token = _create(alice, "acme").json()["token"]

    assert portal_client(mangle(token)).get("/v1/webhook-endpoints").status_code == 401


def test_the_page_learns_what_its_caller_may_do(alice, bob):
    application = make_application(alice.tenant, "acme")
    created = _create(alice, "acme", {"capabilities": ["resend", "view_secret"]}).json()

    portal = portal_client(created["token"]).get("/v1/portal-sessions/current").json()
    owner = alice.client().get("/v1/portal-sessions/current").json()
    member = bob.client().get("/v1/portal-sessions/current").json()

    assert portal == {
        "application_id": str(application.id),
        "capabilities": ["view", "view_secret", "resend"],
    }
    assert owner == {"application_id": None, "capabilities": ALL}
    assert member == {"application_id": None, "capabilities": ["view"]}
