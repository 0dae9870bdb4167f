"""Admin: invitations and signup requests are readable; no token, digest or Turnstile
secret appears on their pages or on the notification list."""

import uuid

import pytest

from tenancy.models import Invitation, SigninLink, SignupRequest
from tests.onboarding.conftest import emailed_token, handle_queued_requests

pytestmark = pytest.mark.django_db


@pytest.fixture
def front_door_rows(alice, anonymous, settings):
    settings.TURNSTILE_SECRET_KEY = ""
    alice.client().post(
        "/v1/invitations",
        {"email": "dana@example.com", "role": "member"},
        format="json",
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )
    anonymous.post(
        "/v1/signup",
        {"email": "ada@example.com", "tenant_name": "Ada's", "captcha_token": "t"},
        format="json",
    )
    return [emailed_token("dana@example.com"), emailed_token("ada@example.com")]


def test_lists_and_pages_show_the_rows_but_no_token_or_digest(admin_client, front_door_rows):
    invitation, signup = Invitation.objects.get(), SignupRequest.objects.get()
    pages = [
        "/admin/tenancy/invitation/",
        f"/admin/tenancy/invitation/{invitation.pk}/change/",
        "/admin/tenancy/signuprequest/",
        f"/admin/tenancy/signuprequest/{signup.pk}/change/",
        "/admin/delivery/notification/",
    ]

    for page in pages:
        response = admin_client.get(page)
        html = response.content.decode()

        assert response.status_code == 200, page
        for secret in [*front_door_rows, invitation.token_digest, signup.token_digest]:
            assert secret not in html, page
    assert "dana@example.com" in admin_client.get(pages[0]).content.decode()
    assert "ada@example.com" in admin_client.get(pages[2]).content.decode()


def test_the_turnstile_secret_never_appears_in_the_admin(admin_client, settings):
    settings.TURNSTILE_SECRET_KEY = "0x4AAAAAAA-very-secret"

    for page in ("/admin/", "/admin/tenancy/signuprequest/", "/admin/tenancy/invitation/"):
        assert "0x4AAAAAAA-very-secret" not in admin_client.get(page).content.decode()


def test_they_cannot_be_added_or_changed_in_the_admin(admin_client):
    assert admin_client.get("/admin/tenancy/invitation/add/").status_code == 403
    assert admin_client.get("/admin/tenancy/signuprequest/add/").status_code == 403


def test_signin_links_show_in_the_admin_without_token_or_digest(admin_client, alice, settings):
    settings.SIGNIN_URL = "https://app.example.com/signin?token={token}"
    alice.client().post(
        "/v1/signin", {"email": "alice@example.com", "captcha_token": "t"}, format="json"
    )
    handle_queued_requests()
    token, link = emailed_token("alice@example.com"), SigninLink.objects.get()

    for page in ("/admin/tenancy/signinlink/", f"/admin/tenancy/signinlink/{link.pk}/change/"):
        response = admin_client.get(page)
        html = response.content.decode()

        assert response.status_code == 200, page
        assert "alice@example.com" in html
        assert token not in html and link.token_digest not in html, page
