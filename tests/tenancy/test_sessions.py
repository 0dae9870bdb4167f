"""Sessions that end and tokens that stay where they are bound (README: Signing in and sessions): an
expired token is 401 `token-expired`, signing out revokes the calling token, and a token bound to
one tenant is 403 in any other."""

import uuid
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from tenancy.models import ApiToken, TokenKind
from tenancy.tokens import session_issue
from tests.conftest import make_member
from tests.web.write_endpoints import assert_problem

pytestmark = pytest.mark.django_db


def bearer(token: str, tenant_id: object | None = None) -> APIClient:
    client = APIClient()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    if tenant_id is not None:
        headers["HTTP_X_TENANT_ID"] = str(tenant_id)
    client.credentials(**headers)
    return client


def test_a_session_works_until_its_end_then_is_401_token_expired(alice, settings):
    settings.SESSION_TTL_SECONDS = 60
    session = session_issue(user=alice.user, name="signin", now=timezone.now())
    assert bearer(session.plaintext).get("/v1/projects").status_code == 200

    ApiToken.objects.filter(pk=session.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = bearer(session.plaintext).get("/v1/projects")

    assert response.status_code == 401
    problem = assert_problem(response)
    assert problem["type"].endswith("/token-expired")
    assert problem["title"] == "Token expired"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_an_expired_api_token_is_token_expired_too(alice):
    _, plaintext = ApiToken.issue(user=alice.user, expires_at=timezone.now() - timedelta(days=1))

    response = bearer(plaintext).get("/v1/me")

    assert response.status_code == 401
    assert response.json()["type"].endswith("/token-expired")


def test_a_revoked_or_unknown_token_is_not_called_expired(alice):
    token, plaintext = ApiToken.issue(
        user=alice.user, expires_at=timezone.now() - timedelta(days=1)
    )
    ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())

    for presented in (plaintext, "tkw_000000000000_not-a-real-secret"):
        response = bearer(presented).get("/v1/me")

        assert response.status_code == 401
        assert not response.json()["type"].endswith("/token-expired")


def test_the_database_refuses_a_session_without_an_end(alice):
    with pytest.raises(IntegrityError), transaction.atomic():
        ApiToken.issue(user=alice.user, kind=TokenKind.SESSION, expires_at=None)


def test_signing_out_revokes_the_calling_token_only(alice):
    other = ApiToken.issue(user=alice.user, name="other")[1]

    response = alice.client().delete("/v1/tokens/current")

    assert response.status_code == 204
    assert response.content == b""
    refused = alice.client().get("/v1/projects")
    assert refused.status_code == 401
    assert not refused.json()["type"].endswith("/token-expired")
    assert bearer(other).get("/v1/projects").status_code == 200


def test_signing_out_twice_is_401_the_second_time(alice):
    assert alice.client().delete("/v1/tokens/current").status_code == 204

    assert alice.client().delete("/v1/tokens/current").status_code == 401


def test_signing_out_anonymously_is_401():
    response = APIClient().delete("/v1/tokens/current")

    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_sessions_past_their_end_leave_the_token_list(alice, settings):
    now = timezone.now()
    live = session_issue(user=alice.user, name="signin", now=now)
    ended = session_issue(user=alice.user, name="signin", now=now - timedelta(days=30))
    expired_api, _ = ApiToken.issue(user=alice.user, expires_at=now - timedelta(days=1))

    listed = {row["id"] for row in alice.client().get("/v1/tokens").json()["results"]}

    assert live.id in listed and expired_api.id in listed
    assert ended.id not in listed


# --- Tokens bound to one tenant ------------------------------------------------------------


@pytest.fixture
def alice_in_b(alice, charlie):
    """Alice belongs to Charlie's tenant B as well (a member there)."""
    make_member(charlie.tenant, alice.user.email)
    return charlie.tenant


def create(client: APIClient, body: dict):
    return client.post(
        "/v1/tokens", body, format="json", headers={"Idempotency-Key": str(uuid.uuid4())}
    )


def test_a_bound_token_acts_in_its_tenant_and_is_403_in_another(alice, alice_in_b):
    response = create(alice.client(), {"name": "ci", "tenant_id": str(alice.tenant.id)})
    assert response.status_code == 201
    assert response.json()["tenant_id"] == str(alice.tenant.id)
    token = response.json()["token"]

    # Alice belongs to two tenants, yet the bound token needs no X-Tenant-ID.
    assert bearer(token).get("/v1/projects").status_code == 200
    assert bearer(token, alice.tenant.id).get("/v1/projects").status_code == 200
    elsewhere = bearer(token, alice_in_b.id).get("/v1/projects")

    assert elsewhere.status_code == 403
    assert_problem(elsewhere)
    # The unbound token of the same user still reaches tenant B.
    assert bearer(alice.token, alice_in_b.id).get("/v1/projects").status_code == 200


def test_binding_a_token_to_a_tenant_you_are_not_in_is_403(alice, charlie):
    response = create(alice.client(), {"name": "ci", "tenant_id": str(charlie.tenant.id)})

    assert response.status_code == 403
    assert_problem(response)
    assert ApiToken.objects.filter(user=alice.user, name="ci").count() == 0


def test_a_bound_token_makes_only_tokens_bound_to_its_tenant(alice, alice_in_b):
    _, plaintext = ApiToken.issue(user=alice.user, name="bound", tenant=alice.tenant)

    unnamed = create(bearer(plaintext), {"name": "child"})
    other = create(bearer(plaintext), {"name": "escape", "tenant_id": str(alice_in_b.id)})

    assert unnamed.status_code == 201
    assert unnamed.json()["tenant_id"] == str(alice.tenant.id)
    assert other.status_code == 403
    assert not ApiToken.objects.filter(name="escape").exists()


def test_a_bound_token_lists_and_revokes_only_the_tokens_bound_to_its_tenant(alice, alice_in_b):
    bound_a, _ = ApiToken.issue(user=alice.user, name="in A", tenant=alice.tenant)
    bound_b, in_b = ApiToken.issue(user=alice.user, name="in B", tenant=alice_in_b)
    unbound = ApiToken.objects.filter(user=alice.user, tenant=None).first()

    listed = bearer(in_b).get("/v1/tokens").json()["results"]
    escapes = [bearer(in_b).delete(f"/v1/tokens/{t.id}") for t in (bound_a, unbound)]

    assert [row["id"] for row in listed] == [bound_b.id]
    assert [response.status_code for response in escapes] == [404, 404]
    assert not ApiToken.objects.filter(pk__in=[bound_a.pk, unbound.pk], revoked_at__isnull=False)
    # The unbound token still sees and revokes every one of its user's tokens.
    every = ApiToken.objects.filter(user=alice.user).count()
    assert len(alice.client().get("/v1/tokens").json()["results"]) == every
    assert alice.client().delete(f"/v1/tokens/{bound_a.id}").status_code == 204


def test_me_through_a_bound_token_lists_only_its_tenant(alice, alice_in_b):
    _, plaintext = ApiToken.issue(user=alice.user, name="bound", tenant=alice.tenant)

    tenants = bearer(plaintext).get("/v1/me").json()["tenants"]

    assert [tenant["id"] for tenant in tenants] == [str(alice.tenant.id)]


def test_tokens_made_before_kinds_and_bindings_are_unbound_api_tokens(alice):
    token = ApiToken.objects.get(user=alice.user)

    assert (token.kind, token.tenant_id, token.expires_at) == (TokenKind.API, None, None)
    assert alice.client().get("/v1/projects").status_code == 200
