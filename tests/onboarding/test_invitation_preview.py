"""POST /v1/invitations/preview (README: Signing in and sessions): what an invitation's token opens,
shown before the invitee accepts, without using the token; the tokens accept refuses are refused
alike."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from tenancy.invitations import invitation_issue
from tenancy.models import Invitation
from tests.conftest import link_token
from tests.onboarding.conftest import emailed_token
from tests.web.write_endpoints import assert_problem

pytestmark = pytest.mark.django_db


def invite(actor, email="dana@example.com", role="member"):
    return actor.client().post(
        "/v1/invitations",
        {"email": email, "role": role},
        format="json",
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )


def preview(client, token):
    return client.post("/v1/invitations/preview", {"token": token}, format="json")


def accept(client, token):
    return client.post("/v1/invitations/accept", {"token": token}, format="json")


def test_preview_shows_the_invitation_and_leaves_it_pending(anonymous, alice):
    invite(alice, role="owner")
    token = emailed_token("dana@example.com")

    response = preview(anonymous, token)

    assert response.status_code == 200
    body = response.json()
    invitation = Invitation.objects.get()
    assert body == {
        "tenant_name": "Tenant A",
        "email": "dana@example.com",
        "role": "owner",
        "invited_by": "alice@example.com",
        "expires_at": body["expires_at"],
    }
    assert parse_datetime(body["expires_at"]) == invitation.expires_at
    assert invitation.status == "pending"
    # Previewed twice, the token still accepts.
    assert preview(anonymous, token).status_code == 200
    assert accept(anonymous, token).status_code == 200


def test_preview_refuses_what_accept_refuses_with_one_answer(anonymous, alice):
    invite(alice, email="used@example.com")
    used = emailed_token("used@example.com")
    accept(anonymous, used)
    invite(alice, email="revoked@example.com")
    revoked = emailed_token("revoked@example.com")
    Invitation.objects.filter(email="revoked@example.com").update(status="revoked")
    invite(alice, email="late@example.com")
    expired = emailed_token("late@example.com")
    Invitation.objects.filter(email="late@example.com").update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    answers = [preview(anonymous, token) for token in (used, revoked, expired, "x" * 43)]

    assert {answer.status_code for answer in answers} == {400}
    for answer in answers:
        assert assert_problem(answer)["type"].endswith("/invalid-token")
    assert len({answer.content for answer in answers}) == 1


def test_an_invitation_without_an_inviter_previews_with_null(anonymous, alice):
    issued = invitation_issue(
        tenant=alice.tenant, email="eve@example.com", role="member", invited_by=None,
        now=timezone.now(),
    )  # fmt: skip

    response = preview(anonymous, link_token(issued.link, "eve@example.com"))

    assert response.status_code == 200
    assert response.json()["invited_by"] is None


def test_a_signed_in_caller_previews_too(alice, charlie):
    invite(alice)

    response = preview(charlie.client(), emailed_token("dana@example.com"))

    assert response.status_code == 200
    assert response.json()["tenant_name"] == "Tenant A"
