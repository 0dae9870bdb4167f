"""The Turnstile check: unit tests of the verdicts with `responses`, and signup against a
fake siteverify over real HTTP with Cloudflare's documented test secrets."""

import json
import logging
from urllib.parse import parse_qs

import pytest
import requests
import responses

from onboarding import turnstile
from onboarding.turnstile import CaptchaFailed, CaptchaUnavailable, captcha_verify
from tenancy.models import SignupRequest

URL = "https://challenges.cloudflare.com/turnstile/v0/siteverify"
SECRET = "0x4AAAAAAAsecret-of-the-widget"


@pytest.fixture
def configured(settings):
    settings.TURNSTILE_SECRET_KEY = SECRET
    settings.TURNSTILE_VERIFY_URL = URL
    settings.TURNSTILE_HOSTNAMES = ["app.example.com"]


def answer(**fields):
    body = {"success": True, "error-codes": [], "hostname": "app.example.com", **fields}
    return responses.Response(responses.POST, URL, json=body)


@responses.activate
def test_the_form_carries_secret_response_remoteip_and_an_idempotency_key(configured):
    responses.add(answer(action="signup"))

    captcha_verify("widget-token", remote_ip="203.0.113.9")

    [call] = responses.calls
    assert call.request.headers["Content-Type"] == "application/x-www-form-urlencoded"
    form = {k: v[0] for k, v in parse_qs(call.request.body.decode()).items()}
    assert set(form) == {"secret", "response", "remoteip", "idempotency_key"}
    assert (form["secret"], form["response"], form["remoteip"]) == (
        SECRET,
        "widget-token",
        "203.0.113.9",
    )


@pytest.mark.parametrize(
    "outcome",
    [
        {"success": False, "error-codes": ["invalid-input-response"]},
        {"success": False, "error-codes": ["timeout-or-duplicate"]},
        {"success": "true"},
        {"hostname": "evil.example.net"},
        {"hostname": None},
        {"action": "login"},
    ],
)
@responses.activate
def test_anything_but_success_on_our_host_for_signup_fails(configured, outcome):
    responses.add(answer(**outcome))

    with pytest.raises(CaptchaFailed):
        captcha_verify("t", remote_ip=None)


@pytest.mark.parametrize("outcome", [{}, {"action": ""}, {"hostname": "testserver"}])
@responses.activate
def test_success_on_an_allowed_host_passes(configured, outcome):
    responses.add(answer(**outcome))

    captcha_verify("t", remote_ip=None)


@pytest.mark.parametrize(
    "reply",
    [
        {"status": 500, "body": "oops"},
        {"status": 502, "body": ""},
        {"status": 200, "body": "<html>"},
        {"status": 200, "body": "[]"},
        {"body": requests.ConnectionError("refused")},
        {"body": requests.Timeout("slow")},
        {"status": 200, "body": json.dumps({"success": False, "error-codes": ["internal-error"]})},
        {
            "status": 200,
            "body": json.dumps({"success": False, "error-codes": ["invalid-input-secret"]}),
        },
    ],
)
@responses.activate
def test_no_verdict_is_unavailable_after_one_retry_with_the_same_key(configured, reply):
    responses.add(responses.POST, URL, **reply)
    responses.add(responses.POST, URL, **reply)

    with pytest.raises(CaptchaUnavailable) as raised:
        captcha_verify("t", remote_ip=None)

    assert raised.value.retry_after == turnstile.RETRY_AFTER_SECONDS
    keys = {parse_qs(call.request.body.decode())["idempotency_key"][0] for call in responses.calls}
    assert len(responses.calls) in (1, 2) and len(keys) == 1


@responses.activate
def test_a_retry_after_one_5xx_gets_the_verdict(configured):
    responses.add(responses.POST, URL, status=503)
    responses.add(answer())

    captcha_verify("t", remote_ip=None)

    assert len(responses.calls) == 2


@responses.activate
def test_without_a_secret_nothing_is_checked(settings):
    settings.TURNSTILE_SECRET_KEY = ""

    captcha_verify("t", remote_ip=None)

    assert len(responses.calls) == 0


@responses.activate
def test_the_secret_and_the_token_never_reach_a_log_line(configured, caplog):
    caplog.set_level(logging.DEBUG)
    responses.add(responses.POST, URL, json={"success": False, "error-codes": ["bad-request"]})

    with pytest.raises(CaptchaFailed):
        captcha_verify("the-visitors-token", remote_ip=None)

    assert SECRET not in caplog.text and "the-visitors-token" not in caplog.text


# Against the fake siteverify, over HTTP, through the API.

SIGNUP = {"email": "ada@example.com", "tenant_name": "A", "captcha_token": "XXXX.DUMMY.TOKEN.XXXX"}


def signup(client, **changes):
    return client.post("/v1/signup", {**SIGNUP, **changes}, format="json")


@pytest.mark.django_db
def test_the_passing_test_secret_lets_a_signup_through(anonymous, siteverify):
    response = signup(anonymous)

    assert response.status_code == 202
    assert SignupRequest.objects.count() == 1
    [sent] = siteverify.requests
    assert sent["secret"] == "1x0000000000000000000000000000000AA"
    assert sent["response"] == "XXXX.DUMMY.TOKEN.XXXX"
    assert sent["remoteip"] == "127.0.0.1" and sent["idempotency_key"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "secret", ["2x0000000000000000000000000000000AA", "3x0000000000000000000000000000000AA"]
)
def test_the_failing_and_the_spent_test_secrets_are_400_captcha_failed(
    anonymous, siteverify, settings, secret
):
    settings.TURNSTILE_SECRET_KEY = secret

    response = signup(anonymous)

    assert response.status_code == 400
    problem = response.json()
    assert problem["type"].endswith("/captcha-failed")
    assert "error-codes" not in response.content.decode()
    assert "duplicate" not in problem["detail"] and "invalid-input" not in problem["detail"]
    assert not SignupRequest.objects.exists()


@pytest.mark.django_db
def test_a_widget_token_passes_once_then_is_spent(anonymous, siteverify, settings):
    settings.TURNSTILE_SECRET_KEY = "0x4AAAAAAA-real-widget"
    siteverify.widget("0x4AAAAAAA-real-widget", hostname="app.example.com", action="signup")
    settings.TURNSTILE_HOSTNAMES = ["app.example.com"]
    token = siteverify.issue("0x4AAAAAAA-real-widget")

    first = signup(anonymous, captcha_token=token)
    again = signup(anonymous, captcha_token=token, email="eve@example.com")

    assert (first.status_code, again.status_code) == (202, 400)


@pytest.mark.django_db
def test_a_widget_on_another_host_is_refused(anonymous, siteverify, settings):
    settings.TURNSTILE_SECRET_KEY = "0x4AAAAAAA-other-site"
    siteverify.widget("0x4AAAAAAA-other-site", hostname="phish.example.net")

    response = signup(anonymous, captcha_token=siteverify.issue("0x4AAAAAAA-other-site"))

    assert response.status_code == 400


@pytest.mark.django_db
def test_an_unknown_secret_is_503_not_an_open_door(anonymous, siteverify, settings):
    settings.TURNSTILE_SECRET_KEY = "0x4AAAAAAA-revoked"

    response = signup(anonymous)

    assert response.status_code == 503
    assert response["Retry-After"] == str(turnstile.RETRY_AFTER_SECONDS)
    assert not SignupRequest.objects.exists()


@pytest.mark.django_db
def test_a_failing_siteverify_is_503_with_retry_after(anonymous, siteverify):
    siteverify.fail_next(500, times=2)

    response = signup(anonymous)

    assert response.status_code == 503
    assert response["Content-Type"] == "application/problem+json"
    assert int(response["Retry-After"]) > 0
    assert not SignupRequest.objects.exists()


@pytest.mark.django_db
def test_a_siteverify_that_answers_too_late_is_503(anonymous, siteverify, monkeypatch):
    monkeypatch.setattr(turnstile, "TIMEOUT_SECONDS", 0.2)
    siteverify.hang_next(1.0, times=2)

    response = signup(anonymous)

    assert response.status_code == 503


@pytest.mark.django_db
def test_an_unreachable_siteverify_is_503(anonymous, settings):
    settings.TURNSTILE_SECRET_KEY = "1x0000000000000000000000000000000AA"
    settings.TURNSTILE_VERIFY_URL = "http://127.0.0.1:9/turnstile/v0/siteverify"

    response = signup(anonymous)

    assert response.status_code == 503
    assert not SignupRequest.objects.exists()


def test_the_fake_replays_an_outcome_for_a_repeated_idempotency_key():
    from tests.support.fake_siteverify import fake_siteverify

    with fake_siteverify() as fake:
        fake.widget("s", hostname="h.example.com")
        form = {"secret": "s", "response": fake.issue("s"), "idempotency_key": "k"}
        first = requests.post(fake.url, data=form, timeout=5).json()
        again = requests.post(fake.url, data=form, timeout=5).json()
        other = requests.post(fake.url, data={**form, "idempotency_key": "k2"}, timeout=5).json()

    assert first == again and first["success"] is True
    assert other["error-codes"] == ["timeout-or-duplicate"]
