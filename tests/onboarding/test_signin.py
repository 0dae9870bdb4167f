"""POST /v1/signin and /v1/signin/verify (README: Signing in and sessions): the same bytes for every
address, a single-use 15-minute link for an account, kept only as a digest, traded for a session."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from delivery.models import Notification
from onboarding.signins import (
    LINK_TTL,
    MAX_SPACING,
    resend_spacing,
    signin_link_record,
)
from tenancy.models import ApiToken, SigninLink, token_digest
from tests.onboarding.conftest import (
    account_emails,
    deliver_mail,
    emailed_token,
    handle_queued_requests,
)
from tests.web.write_endpoints import assert_problem

pytestmark = pytest.mark.django_db

NOW = datetime(2031, 5, 20, 8, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _signin_links(settings):
    settings.SIGNIN_URL = "https://app.example.com/signin?token={token}"


def signin(client, email="alice@example.com", **changes):
    """POST /v1/signin, then the queued request handled as consume_jobs would."""
    body = {"email": email, "captcha_token": "t", **changes}
    response = client.post("/v1/signin", body, format="json")
    handle_queued_requests()
    return response


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


def test_a_new_link_does_not_end_the_one_its_user_holds(alice):
    issued = [signin_link_record(email="alice@example.com", address="ip", now=NOW)]
    later = NOW + resend_spacing(1)
    issued.append(signin_link_record(email="alice@example.com", address="ip", now=later))

    assert None not in issued
    for link in SigninLink.objects.all():
        assert (link.used_at, link.expires_at > later) == (None, True)


def test_a_request_within_the_spacing_sends_nothing_and_the_held_link_still_works(anonymous, alice):
    signin(anonymous)
    first = emailed_token("alice@example.com")
    answers = [signin(anonymous) for _ in range(3)]

    assert {answer.content for answer in answers} == {b'{"status":"link_sent"}'}
    assert SigninLink.objects.count() == 1
    assert len(account_emails("alice@example.com")) == 1
    assert verify(anonymous, first).status_code == 201


def test_once_the_held_link_is_used_the_next_request_sends_a_new_one(alice):
    signin_link_record(email="alice@example.com", address="ip", now=NOW)
    SigninLink.objects.update(used_at=NOW + timedelta(seconds=5))

    again = signin_link_record(
        email="alice@example.com", address="ip", now=NOW + timedelta(seconds=10)
    )

    assert again is not None
    assert SigninLink.objects.count() == 2


def test_a_stranger_asking_all_day_never_locks_the_user_out_nor_floods_the_inbox(alice):
    """A request every minute for a day, each one a stranger's: whenever one sends nothing,
    the user already holds an unused link good for several more minutes, and the inbox gets
    a bounded number of emails, the hourly rate falling to one per MAX_SPACING."""
    sent_at = []
    for minute in range(24 * 60):
        now = NOW + timedelta(minutes=minute)
        if signin_link_record(email="alice@example.com", address="stranger", now=now):
            sent_at.append(now)
            continue
        held = SigninLink.objects.filter(user=alice.user, used_at__isnull=True)
        assert held.filter(expires_at__gte=now + LINK_TTL - MAX_SPACING).exists(), minute

    per_hour = [sum(1 for at in sent_at if at.hour == hour) for hour in range(24)]
    assert max(per_hour) <= 10
    assert per_hour[-1] == 60 // (MAX_SPACING.total_seconds() // 60)
    assert len(sent_at) <= 24 * 6 + 4


def test_an_inactive_user_gets_no_link(anonymous, alice):
    get_user_model().objects.filter(pk=alice.user.pk).update(is_active=False)

    response = signin(anonymous)

    assert response.status_code == 202
    assert not SigninLink.objects.exists()


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
