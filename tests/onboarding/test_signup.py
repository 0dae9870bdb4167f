"""POST /v1/signup and /v1/signup/verify (README: API overview): no account enumeration, one pending
request per address, single-use hashed tokens, the tenant made in one transaction."""

import logging
from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from tenancy.front_door import ACCOUNT_MAIL_TENANT_ID
from tenancy.models import ApiToken, Membership, SignupRequest, Tenant, token_digest
from tests.onboarding.conftest import account_emails, deliver_mail, emailed_token
from web.fields import LINE_BREAK_RULE

pytestmark = pytest.mark.django_db

SIGNUP = {"email": "Ada@Example.com", "tenant_name": "Analytical", "captcha_token": "t"}


def signup(client, **changes):
    return client.post("/v1/signup", {**SIGNUP, **changes}, format="json")


def verify(client, token):
    return client.post("/v1/signup/verify", {"token": token}, format="json")


def test_signup_answers_202_and_emails_a_verification_link(anonymous):
    response = signup(anonymous)

    assert response.status_code == 202
    assert response.json() == {"status": "verification_sent"}
    [email] = account_emails("ada@example.com")
    assert email.subject == "Confirm your Tickwork signup"
    assert "https://app.example.com/verify?token=" in email.body
    assert email.next_fire_at is not None and email.rrule == ""
    [row] = SignupRequest.objects.all()
    assert row.token_digest == token_digest(emailed_token("ada@example.com"))
    assert emailed_token("ada@example.com") not in str(SignupRequest.objects.values().get())


def test_the_email_is_delivered_by_run_tick(anonymous):
    signup(anonymous)
    token = emailed_token("ada@example.com")

    [sent] = deliver_mail()

    assert sent.to == ["ada@example.com"]
    assert f"https://app.example.com/verify?token={token}" in sent.body


def test_a_known_address_gets_the_same_answer_as_an_unknown_one(anonymous, alice):
    unknown = signup(anonymous, email="nobody@example.com")
    known = signup(anonymous, email=alice.user.email)

    assert (known.status_code, known.content) == (unknown.status_code, unknown.content)
    assert len(account_emails(alice.user.email)) == 1


def test_a_repeat_within_a_minute_sends_nothing_more_and_still_answers_202(anonymous):
    signup(anonymous)

    again = signup(anonymous, tenant_name="Other")

    assert again.status_code == 202
    assert len(account_emails("ada@example.com")) == 1
    assert SignupRequest.objects.count() == 1


def test_a_repeat_after_a_minute_re_sends_with_a_new_token_and_the_old_one_stops(anonymous):
    signup(anonymous)
    first = emailed_token("ada@example.com")
    SignupRequest.objects.update(sent_at=timezone.now() - timedelta(seconds=61))

    signup(anonymous)
    second = emailed_token("ada@example.com")

    assert first != second and len(account_emails("ada@example.com")) == 2
    assert SignupRequest.objects.count() == 1
    assert verify(anonymous, first).status_code == 400
    assert verify(anonymous, second).status_code == 201


def test_verify_creates_the_tenant_its_owner_and_a_working_token(anonymous):
    signup(anonymous)

    response = verify(anonymous, emailed_token("ada@example.com"))

    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"tenant_id", "user_email", "token", "expires_at"}
    tenant = Tenant.objects.get(pk=body["tenant_id"])
    assert (tenant.name, body["user_email"]) == ("Analytical", "ada@example.com")
    assert Membership.objects.get(tenant=tenant).role == "owner"
    me = anonymous.get("/v1/me", HTTP_AUTHORIZATION=f"Bearer {body['token']}")
    assert me.json()["tenants"] == [{"id": str(tenant.id), "name": "Analytical", "role": "owner"}]


def test_a_used_an_expired_and_an_unknown_token_get_one_answer(anonymous):
    signup(anonymous, email="used@example.com")
    used = emailed_token("used@example.com")
    verify(anonymous, used)
    signup(anonymous, email="late@example.com")
    late = emailed_token("late@example.com")
    SignupRequest.objects.filter(email="late@example.com").update(expires_at=timezone.now())
    tenants = Tenant.objects.count()

    answers = [verify(anonymous, token) for token in (used, late, "never-issued")]

    assert {(a.status_code, a.content) for a in answers} == {(400, answers[0].content)}
    problem = answers[0].json()
    assert problem["type"].endswith("/invalid-token")
    assert Tenant.objects.count() == tenants


def test_off_unless_enabled_both_routes_are_404(anonymous, settings):
    settings.SIGNUP_ENABLED = False

    for path in ("/v1/signup", "/v1/signup/verify"):
        response = anonymous.post(path, SIGNUP, format="json")

        assert response.status_code == 404
        assert response["Content-Type"] == "application/problem+json"
    assert not SignupRequest.objects.exists()


def test_the_per_address_limit_answers_429_with_retry_after(anonymous, settings):
    settings.SIGNUP_RATE_IP = "2/hour"

    statuses = [signup(anonymous, email=f"u{i}@example.com").status_code for i in range(3)]

    assert statuses == [202, 202, 429]
    assert int(signup(anonymous)["Retry-After"]) > 3500
    assert SignupRequest.objects.count() == 2


def test_a_refused_signup_does_not_count_toward_the_per_address_limit(
    anonymous, siteverify, settings
):
    settings.SIGNUP_RATE_IP = "2/hour"
    malformed = [signup(anonymous, email="not-an-address") for _ in range(3)]
    settings.TURNSTILE_SECRET_KEY = "2x0000000000000000000000000000000AA"
    failed_captcha = [signup(anonymous) for _ in range(3)]
    settings.TURNSTILE_SECRET_KEY = "1x0000000000000000000000000000000AA"

    accepted = [signup(anonymous, email=f"u{i}@example.com") for i in range(3)]

    assert [r.status_code for r in malformed + failed_captcha] == [400] * 6
    assert [r.status_code for r in accepted] == [202, 202, 429]
    assert SignupRequest.objects.count() == 2


@pytest.mark.parametrize(
    "body",
    [
        {"email": "not-an-address", "tenant_name": "A", "captcha_token": "t"},
        {"email": "a@example.com", "tenant_name": "A"},
        {**SIGNUP, "role": "owner"},
        {**SIGNUP, "captcha_token": "x" * 2049},
    ],
)
def test_a_malformed_signup_is_400_and_records_nothing(anonymous, body):
    response = anonymous.post("/v1/signup", body, format="json")

    assert response.status_code == 400
    assert not SignupRequest.objects.exists()


def test_signup_emails_live_in_the_account_mail_tenant_that_nobody_can_select(anonymous, alice):
    signup(anonymous, email=alice.user.email)

    listed = alice.client().get("/v1/notifications").json()["results"]
    chosen = alice.client(tenant=Tenant.objects.get(pk=ACCOUNT_MAIL_TENANT_ID))

    assert listed == []
    assert chosen.get("/v1/notifications").status_code == 403


def test_no_token_reaches_a_log_line(anonymous, caplog):
    caplog.set_level(logging.DEBUG)
    signup(anonymous)
    token = emailed_token("ada@example.com")

    verify(anonymous, token)
    verify(anonymous, token)
    deliver_mail()

    assert token not in caplog.text


def test_verify_hands_out_a_session_that_ends_after_the_session_ttl(anonymous, settings):
    settings.SESSION_TTL_SECONDS = 3600
    signup(anonymous)
    before = timezone.now()

    body = verify(anonymous, emailed_token("ada@example.com")).json()

    session = ApiToken.objects.get(user__email="ada@example.com")
    assert session.kind == "session"
    expected = session.created_at + timedelta(seconds=3600)
    assert session.expires_at == expected and session.created_at >= before
    assert parse_datetime(body["expires_at"]) == expected


@pytest.mark.parametrize("name", ["Team\r\nBcc: all@example.com", "Te\u2028am", "Te\x85am"])
def test_a_tenant_name_with_a_line_break_is_400_and_sends_nothing(anonymous, name):
    response = signup(anonymous, tenant_name=name)

    assert response.status_code == 400
    assert response.json()["errors"] == {"tenant_name": [LINE_BREAK_RULE]}
    assert account_emails() == []
