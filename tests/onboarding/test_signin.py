"""POST /v1/signin and /v1/signin/verify (README: Signing in and sessions): the same bytes for every
address, a single-use 15-minute link for an account, kept only as a digest, traded for a session."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from delivery.models import Notification
from tenancy.models import ApiToken, SigninLink, token_digest
from tests.onboarding.conftest import account_emails, deliver_mail, emailed_token
from tests.web.write_endpoints import assert_problem

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _signin_links(settings):
    settings.SIGNIN_URL = "https://app.example.com/signin?token={token}"


def signin(client, email="alice@example.com", **changes):
    body = {"email": email, "captcha_token": "t", **changes}
    return client.post("/v1/signin", body, format="json")


def verify(client, token):
    return client.post("/v1/signin/verify", {"token": token}, format="json")


def test_known_and_unknown_addresses_get_the_same_bytes(anonymous, alice):
    known = signin(anonymous, "Alice@Example.com")
    unknown = signin(anonymous, "nobody@example.com")

    assert known.status_code == unknown.status_code == 202
    assert known.content == unknown.content
    assert known.json() == {"status": "link_sent"}
    assert known["Content-Type"] == unknown["Content-Type"]
    assert account_emails("nobody@example.com") == []
    assert SigninLink.objects.filter(user=alice.user).count() == 1
    assert SigninLink.objects.count() == 1


def test_an_account_is_emailed_a_single_use_link_kept_only_as_a_digest(anonymous, alice):
    signin(anonymous)

    [email] = account_emails("alice@example.com")
    assert email.subject == "Your Tickwork sign-in link"
    assert "https://app.example.com/signin?token=" in email.body
    assert "15 minutes" in email.body
    token = emailed_token("alice@example.com")
    link = SigninLink.objects.get()
    assert link.token_digest == token_digest(token)
    assert token not in str(SigninLink.objects.values().get())
    assert token not in Notification.objects.get(pk=email.pk).body
    assert timedelta(minutes=14) < link.expires_at - link.created_at <= timedelta(minutes=15)


def test_verify_answers_a_session_for_the_user(anonymous, alice, settings):
    settings.SESSION_TTL_SECONDS = 3600
    alice.user.first_name = "Alice"
    alice.user.save()
    signin(anonymous)

    response = verify(anonymous, emailed_token("alice@example.com"))

    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"token", "expires_at", "user"}
    assert body["user"] == {"id": alice.user.id, "email": "alice@example.com", "name": "Alice"}
    session = ApiToken.objects.get(user=alice.user, kind="session")
    assert parse_datetime(body["expires_at"]) == session.expires_at
    assert session.expires_at - session.created_at == timedelta(seconds=3600)
    me = anonymous.get("/v1/me", HTTP_AUTHORIZATION=f"Bearer {body['token']}")
    assert me.status_code == 200 and me.json()["id"] == alice.user.id


def test_a_used_an_expired_and_an_unknown_token_get_one_answer(anonymous, alice):
    signin(anonymous)
    used = emailed_token("alice@example.com")
    assert verify(anonymous, used).status_code == 201
    signin(anonymous)
    expired = emailed_token("alice@example.com")
    SigninLink.objects.filter(token_digest=token_digest(expired)).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    answers = [verify(anonymous, token) for token in (used, expired, "x" * 43)]

    assert {answer.status_code for answer in answers} == {400}
    problems = [assert_problem(answer) for answer in answers]
    assert all(problem["type"].endswith("/invalid-token") for problem in problems)
    assert len({answer.content for answer in answers}) == 1
    assert ApiToken.objects.filter(user=alice.user, kind="session").count() == 1


def test_a_new_link_ends_the_earlier_one(anonymous, alice):
    signin(anonymous)
    first = emailed_token("alice@example.com")
    signin(anonymous)
    second = emailed_token("alice@example.com")

    assert verify(anonymous, first).status_code == 400
    assert verify(anonymous, second).status_code == 201


def test_an_inactive_user_gets_no_link(anonymous, alice):
    get_user_model().objects.filter(pk=alice.user.pk).update(is_active=False)

    response = signin(anonymous)

    assert response.status_code == 202
    assert not SigninLink.objects.exists()


def test_one_address_is_sent_a_few_links_an_hour_and_hears_the_same(anonymous, alice, settings):
    settings.SIGNIN_RATE_IP = "100/hour"
    answers = [signin(anonymous) for _ in range(7)]

    assert {answer.content for answer in answers} == {b'{"status":"link_sent"}'}
    assert SigninLink.objects.count() == 5
    assert len(account_emails("alice@example.com")) == 5


def test_the_client_address_is_limited_by_signin_rate_ip(anonymous, settings, db):
    settings.SIGNIN_RATE_IP = "2/hour"

    answers = [signin(anonymous, f"n{i}@example.com") for i in range(3)]

    assert [answer.status_code for answer in answers] == [202, 202, 429]
    assert int(answers[-1]["Retry-After"]) > 0


def test_a_refused_signin_does_not_count_toward_the_per_address_limit(anonymous, alice, settings):
    settings.SIGNIN_RATE_IP = "2/hour"
    refused = [signin(anonymous, "not-an-address") for _ in range(3)]

    answers = [signin(anonymous, f"n{i}@example.com") for i in range(3)]

    assert [answer.status_code for answer in refused] == [400, 400, 400]
    assert [answer.status_code for answer in answers] == [202, 202, 429]


def test_signin_is_off_with_the_front_door(anonymous, alice, settings):
    settings.SIGNUP_ENABLED = False

    assert signin(anonymous).status_code == 404
    assert verify(anonymous, "x" * 43).status_code == 404
    assert not SigninLink.objects.exists()


def test_a_failed_captcha_is_400_and_sends_nothing(anonymous, alice, siteverify, settings):
    settings.TURNSTILE_SECRET_KEY = "2x0000000000000000000000000000000AA"

    response = signin(anonymous)

    assert response.status_code == 400
    assert_problem(response)
    assert not SigninLink.objects.exists()


def test_a_signup_widget_token_does_not_sign_in(anonymous, alice, siteverify, settings):
    settings.TURNSTILE_SECRET_KEY = "0x4AAAAAAA-signup-widget"
    siteverify.widget("0x4AAAAAAA-signup-widget", hostname="example.com", action="signup")

    refused = signin(anonymous, captcha_token=siteverify.issue("0x4AAAAAAA-signup-widget"))

    assert refused.status_code == 400
    assert not SigninLink.objects.exists()


def test_a_signin_widget_token_signs_in(anonymous, alice, siteverify, settings):
    settings.TURNSTILE_SECRET_KEY = "0x4AAAAAAA-signin-widget"
    siteverify.widget("0x4AAAAAAA-signin-widget", hostname="example.com", action="signin")

    response = signin(anonymous, captcha_token=siteverify.issue("0x4AAAAAAA-signin-widget"))

    assert response.status_code == 202
    assert SigninLink.objects.count() == 1


def test_the_link_is_delivered_by_the_tick(anonymous, alice):
    signin(anonymous)

    received = [email for email in deliver_mail() if email.to == ["alice@example.com"]]

    assert len(received) == 1
    assert "https://app.example.com/signin?token=" in received[0].body
