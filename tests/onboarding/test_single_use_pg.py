"""One token, racing requests on real PostgreSQL connections: one wins, the others are 400
`invalid-token` — one tenant from a verification, one membership from an invitation, one
session from a signin link."""

import uuid

import pytest
from rest_framework.test import APIClient

from tenancy.models import ApiToken, Membership, SignupRequest, Tenant
from tests.conftest import requires_postgres
from tests.onboarding.conftest import emailed_token, handle_queued_requests
from tests.support.concurrency import run_together

RACERS = 4


def race(path: str, body: dict) -> list[int]:
    def one() -> int:
        return APIClient().post(path, body, format="json").status_code

    return sorted(run_together([one] * RACERS))


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_racing_verifies_of_one_token_make_one_tenant(anonymous):
    anonymous.post(
        "/v1/signup",
        {"email": "ada@example.com", "tenant_name": "Raced", "captcha_token": "t"},
        format="json",
    )

    statuses = race("/v1/signup/verify", {"token": emailed_token("ada@example.com")})

    assert statuses == [201] + [400] * (RACERS - 1)
    assert Tenant.objects.filter(name="Raced").count() == 1
    assert SignupRequest.objects.get().used_at is not None


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_racing_accepts_of_one_invitation_make_one_membership(alice):
    alice.client().post(
        "/v1/invitations",
        {"email": "dana@example.com", "role": "member"},
        format="json",
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )

    statuses = race("/v1/invitations/accept", {"token": emailed_token("dana@example.com")})

    assert statuses == [200] + [400] * (RACERS - 1)
    assert Membership.objects.filter(user__email="dana@example.com").count() == 1


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_racing_verifies_of_one_signin_link_make_one_session(alice, settings):
    settings.SIGNIN_URL = "https://app.example.com/signin?token={token}"
    alice.client().post(
        "/v1/signin", {"email": "alice@example.com", "captcha_token": "t"}, format="json"
    )
    handle_queued_requests()

    statuses = race("/v1/signin/verify", {"token": emailed_token("alice@example.com")})

    assert statuses == [201] + [400] * (RACERS - 1)
    assert ApiToken.objects.filter(user=alice.user, kind="session").count() == 1
