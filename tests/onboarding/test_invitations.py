"""/v1/invitations: create (owner, Idempotency-Key required), list, read, revoke, and the
public or signed-in accept (README: API overview)."""

import logging
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework.test import APIClient

from tenancy.models import ApiToken, Invitation, Membership
from tests.conftest import make_owner
from tests.onboarding.conftest import account_emails, deliver_mail, emailed_token

pytestmark = pytest.mark.django_db


def invite(actor, email="dana@example.com", role="member", key=None):
    return actor.client().post(
        "/v1/invitations",
        {"email": email, "role": role},
        format="json",
        headers={"Idempotency-Key": key or str(uuid.uuid4())},
    )


def accept(client, token):
    return client.post("/v1/invitations/accept", {"token": token}, format="json")


def test_an_owner_invites_and_the_invitee_gets_an_accept_link(alice):
    response = invite(alice, email="Dana@Example.com")

    assert response.status_code == 201
    body = response.json()
    assert response["Location"] == f"/v1/invitations/{body['id']}"
    assert set(body) == {"id", "email", "role", "status", "expires_at", "invited_by", "created_at"}
    assert (body["email"], body["role"], body["status"]) == (
        "dana@example.com",
        "member",
        "pending",
    )
    assert body["invited_by"] == "alice@example.com"
    [sent] = deliver_mail()
    assert sent.to == ["dana@example.com"]
    assert sent.subject == 'You are invited to the team "Tenant A" on Tickwork'
    assert "https://app.example.com/join?token=" in sent.body
    assert "project" not in sent.body  # made directly, not by a project's invite list


def test_the_idempotency_key_is_required_and_a_retry_replays(alice):
    body = {"email": "d@example.com", "role": "member"}
    missing = alice.client().post("/v1/invitations", body, format="json")
    first = invite(alice, key="k-1")
    again = invite(alice, key="k-1")

    assert missing.status_code == 400
    assert (again.status_code, again.content) == (first.status_code, first.content)
    assert again["Idempotent-Replayed"] == "true"
    assert len(account_emails("dana@example.com")) == 1


def test_inviting_a_member_is_409(alice, bob):
    response = invite(alice, email=bob.user.email.upper())

    assert response.status_code == 409
    assert not Invitation.objects.exists()


def test_a_second_invitation_re_sends_the_same_one_with_a_new_token(anonymous, alice):
    first = invite(alice).json()
    old = emailed_token("dana@example.com")

    second = invite(alice, role="owner").json()
    new = emailed_token("dana@example.com")

    assert second["id"] == first["id"] and second["role"] == "owner"
    assert old != new and Invitation.objects.count() == 1
    assert accept(anonymous, old).status_code == 400
    assert accept(anonymous, new).status_code == 200


def test_anonymous_accept_creates_the_user_the_membership_and_a_token(anonymous, alice):
    invite(alice)

    response = accept(anonymous, emailed_token("dana@example.com"))

    assert response.status_code == 200
    body = response.json()
    assert (body["tenant_id"], body["user_email"], body["role"]) == (
        str(alice.tenant.id),
        "dana@example.com",
        "member",
    )
    projects = anonymous.get("/v1/projects", HTTP_AUTHORIZATION=f"Bearer {body['token']}")
    assert projects.status_code == 200
    assert Invitation.objects.get().status == "accepted"
    session = ApiToken.objects.get(user__email="dana@example.com")
    assert session.kind == "session"
    assert body["expires_at"] is not None
    assert parse_datetime(body["expires_at"]) == session.expires_at


def test_a_signed_in_invitee_accepts_without_a_new_token(alice, charlie):
    invite(alice, email=charlie.user.email)
    tokens = ApiToken.objects.count()

    response = accept(charlie.client(), emailed_token(charlie.user.email))

    assert response.status_code == 200
    assert response.json()["token"] is None
    assert response.json()["expires_at"] is None
    assert ApiToken.objects.count() == tokens
    assert Membership.objects.filter(tenant=alice.tenant, user=charlie.user).exists()


def test_someone_else_signed_in_is_403_and_the_invitation_stays_pending(alice, charlie):
    invite(alice)

    response = accept(charlie.client(), emailed_token("dana@example.com"))

    assert response.status_code == 403
    assert Invitation.objects.get().status == "pending"


def test_a_token_bound_to_another_tenant_cannot_accept_and_the_invitation_stays_pending(
    alice, charlie
):
    # Charlie's token bound to Charlie's own tenant acts there only: not in Alice's.
    _, bound = ApiToken.issue(user=charlie.user, name="ci", tenant=charlie.tenant)
    invite(alice, email=charlie.user.email)
    token = emailed_token(charlie.user.email)

    refused = accept(APIClient(headers={"Authorization": f"Bearer {bound}"}), token)

    assert refused.status_code == 403
    assert refused["Content-Type"] == "application/problem+json"
    assert Invitation.objects.get().status == "pending"
    assert not Membership.objects.filter(tenant=alice.tenant, user=charlie.user).exists()
    assert accept(charlie.client(), token).status_code == 200


def test_revoked_used_expired_and_unknown_tokens_get_one_answer(anonymous, alice):
    revoked_id = invite(alice, email="r@example.com").json()["id"]
    revoked = emailed_token("r@example.com")
    assert alice.client().delete(f"/v1/invitations/{revoked_id}").status_code == 204
    invite(alice, email="u@example.com")
    used = emailed_token("u@example.com")
    accept(anonymous, used)
    invite(alice, email="e@example.com")
    expired = emailed_token("e@example.com")
    Invitation.objects.filter(email="e@example.com").update(expires_at=timezone.now())

    answers = [accept(anonymous, t) for t in (revoked, used, expired, "never-issued")]

    assert {(a.status_code, a.content) for a in answers} == {(400, answers[0].content)}
    assert answers[0].json()["type"].endswith("/invalid-token")
    assert not Membership.objects.filter(user__email__in=["r@example.com", "e@example.com"])


def test_the_list_filters_by_status_and_shows_expiry(alice):
    invite(alice, email="p@example.com")
    invite(alice, email="x@example.com")
    Invitation.objects.filter(email="x@example.com").update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    client = alice.client()

    def emails(query=""):
        return [row["email"] for row in client.get(f"/v1/invitations{query}").json()["results"]]

    assert emails() == ["x@example.com", "p@example.com"]
    assert emails("?status=pending") == ["p@example.com"]
    assert emails("?status=expired") == ["x@example.com"]
    assert client.get("/v1/invitations?status=bogus").status_code == 400
    assert client.get("/v1/invitations?status=pending&status=revoked").status_code == 400


def test_an_expired_invitation_can_be_sent_again(anonymous, alice):
    invite(alice)
    Invitation.objects.update(expires_at=timezone.now())

    again = invite(alice).json()

    assert again["status"] == "pending" and Invitation.objects.count() == 1
    assert accept(anonymous, emailed_token("dana@example.com")).status_code == 200


def test_revoking_an_accepted_invitation_is_409(anonymous, alice):
    invitation_id = invite(alice).json()["id"]
    accept(anonymous, emailed_token("dana@example.com"))

    assert alice.client().delete(f"/v1/invitations/{invitation_id}").status_code == 409


def test_another_tenants_invitation_is_404(alice):
    other = make_owner("Tenant C", "carol@example.com")
    invitation_id = invite(other).json()["id"]

    assert alice.client().get(f"/v1/invitations/{invitation_id}").status_code == 404
    assert alice.client().delete(f"/v1/invitations/{invitation_id}").status_code == 404
    assert Invitation.objects.get().status == "pending"


def test_no_token_reaches_a_log_line_or_a_problem(anonymous, alice, caplog):
    caplog.set_level(logging.DEBUG)
    invite(alice)
    token = emailed_token("dana@example.com")

    answers = [accept(anonymous, token), accept(anonymous, token), accept(alice.client(), token)]

    assert token not in caplog.text
    assert all(token not in answer.content.decode() for answer in answers[1:])


def test_a_second_delete_is_404_as_for_a_token(alice):
    invitation_id = invite(alice).json()["id"]
    token_id = (
        alice.client()
        .post("/v1/tokens", {"name": "ci"}, format="json", headers={"Idempotency-Key": "t"})
        .json()["id"]
    )
    client = alice.client()

    first = [client.delete(f"/v1/invitations/{invitation_id}").status_code]
    first.append(client.delete(f"/v1/tokens/{token_id}").status_code)
    second = [client.delete(f"/v1/invitations/{invitation_id}").status_code]
    second.append(client.delete(f"/v1/tokens/{token_id}").status_code)

    assert first == [204, 204]
    assert second == [404, 404]
    assert Invitation.objects.get().status == "revoked"
