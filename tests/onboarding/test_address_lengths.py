"""Email addresses the columns can hold (RFC 5321: at most 254 characters) on every route
that takes one: a longer one is a 400 naming the field before any side effect — no CAPTCHA
spent, no row, no job — where it used to be a 500 or a provision job failing five times."""

import pytest
from django.core.management import call_command

from delivery.models import Notification
from jobs.models import Job
from projects.models import Project
from tenancy.models import Invitation, OperationKey, SignupRequest
from tests.onboarding.conftest import account_emails, deliver_mail, emailed_token
from tests.support.addresses import address
from tests.web.write_endpoints import assert_problem
from web.fields import MAX_EMAIL_LENGTH, validate_email_address

pytestmark = pytest.mark.django_db

OVERLONG = (MAX_EMAIL_LENGTH + 1, 300, 320)


def _post(client, path, body, key=None):
    return client.post(path, body, format="json", headers={"Idempotency-Key": key or "k-1"})


def assert_refused(response, field):
    assert response.status_code == 400, response.content
    problem = assert_problem(response)
    assert problem["type"].endswith("/validation-error")
    assert field in problem["errors"], problem
    assert OperationKey.objects.count() == 0


@pytest.mark.parametrize("length", [MAX_EMAIL_LENGTH - 1, MAX_EMAIL_LENGTH, *OVERLONG])
def test_the_shared_validator_takes_254_characters_and_no_more(length):
    if length <= MAX_EMAIL_LENGTH:
        validate_email_address(address(length))
    else:
        with pytest.raises(Exception, match=f"at most {MAX_EMAIL_LENGTH} characters"):
            validate_email_address(address(length))


@pytest.mark.parametrize("length", OVERLONG)
def test_signup_refuses_an_overlong_address_before_spending_the_captcha(
    anonymous, siteverify, length
):
    body = {"email": address(length), "tenant_name": "Long", "captcha_token": "t"}
    response = _post(anonymous, "/v1/signup", body)

    assert_refused(response, "email")
    assert siteverify.requests == []
    assert SignupRequest.objects.count() == 0
    assert account_emails() == []


@pytest.mark.parametrize("length", OVERLONG)
def test_an_invitation_to_an_overlong_address_is_400(alice, length):
    response = _post(
        alice.client(), "/v1/invitations", {"email": address(length), "role": "member"}
    )

    assert_refused(response, "email")
    assert Invitation.objects.count() == 0
    assert account_emails() == []


@pytest.mark.parametrize("length", OVERLONG)
def test_a_project_inviting_an_overlong_address_is_400_and_queues_no_job(alice, length):
    body = {"name": "Long", "invite": ["ok@example.com", address(length)]}
    response = _post(alice.client(), "/v1/projects", body)

    assert_refused(response, "invite")
    assert (Project.objects.count(), Job.objects.count()) == (0, 0)


@pytest.mark.parametrize("length", OVERLONG)
def test_a_notification_to_an_overlong_address_is_400_at_create_and_patch(alice, length):
    body = {"channels": ["email"], "email_to": [address(length)], "subject": "S", "body": "B"}
    created = _post(alice.client(), "/v1/notifications", body)
    assert_refused(created, "email_to")
    assert Notification.objects.count() == 0

    ok = _post(alice.client(), "/v1/notifications", {**body, "email_to": ["ok@example.com"]}, "k2")
    assert ok.status_code == 201
    patched = alice.client().patch(ok["Location"], {"email_to": [address(length)]}, format="json")
    assert patched.status_code == 400
    assert "email_to" in assert_problem(patched)["errors"]
    assert Notification.objects.get().email_to == ["ok@example.com"]


def test_the_longest_address_goes_all_the_way_through(alice, anonymous):
    """Invited, provisioned, mailed, accepted and signed up: every column holds it."""
    longest = address(MAX_EMAIL_LENGTH)
    invited = _post(alice.client(), "/v1/invitations", {"email": longest, "role": "member"})
    project = _post(alice.client(), "/v1/projects", {"name": "P", "invite": [longest]}, "k-2")
    assert (invited.status_code, project.status_code) == (201, 202)
    call_command("consume_jobs")
    assert Project.objects.get().status == "active"

    accepted = anonymous.post(
        "/v1/invitations/accept", {"token": emailed_token(longest)}, format="json"
    )
    assert accepted.status_code == 200, accepted.content
    assert accepted.json()["user_email"] == longest

    other = address(MAX_EMAIL_LENGTH - 1)
    body = {"email": other, "tenant_name": "L", "captcha_token": "t"}
    assert _post(anonymous, "/v1/signup", body, "k-3").status_code == 202
    verified = anonymous.post("/v1/signup/verify", {"token": emailed_token(other)}, format="json")
    assert verified.status_code == 201, verified.content
    assert sorted(message.to[0] for message in deliver_mail()) == sorted([longest, other])
