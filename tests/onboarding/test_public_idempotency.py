"""Idempotency-Key on the public routes (README "API overview"): keyed by (route, key), a
signup replays its stored bytes without asking Turnstile or emailing again, and a verify or
an anonymous accept — whose answers show an API token once — replays as a 409 naming the
membership, with no secret in the key table."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

import onboarding.services
from tenancy.models import OperationKey, SignupRequest
from tests.onboarding.conftest import account_emails, emailed_token

pytestmark = pytest.mark.django_db

SIGNUP = {"email": "ada@example.com", "tenant_name": "Analytical", "captcha_token": "t"}


def post(client, path, body, key):
    return client.post(path, body, format="json", headers={"Idempotency-Key": key})


@pytest.fixture
def captcha_calls(monkeypatch):
    calls = []
    real = onboarding.services.captcha_verify

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(onboarding.services, "captcha_verify", counted)
    return calls


def test_a_signup_replay_answers_the_stored_bytes_and_asks_and_sends_nothing(
    anonymous, captcha_calls
):
    key = str(uuid.uuid4())
    first = post(anonymous, "/v1/signup", SIGNUP, key)
    # Past the re-send minute: only a replay explains a second request sending nothing.
    SignupRequest.objects.update(sent_at=timezone.now() - timedelta(seconds=61))

    again = post(anonymous, "/v1/signup", SIGNUP, key)

    assert first.status_code == again.status_code == 202
    assert again.content == first.content
    assert again.headers["Idempotent-Replayed"] == "true"
    assert len(captcha_calls) == 1
    assert len(account_emails("ada@example.com")) == 1


def test_a_signup_key_sent_with_another_body_is_422(anonymous):
    key = str(uuid.uuid4())
    post(anonymous, "/v1/signup", SIGNUP, key)

    other = post(anonymous, "/v1/signup", {**SIGNUP, "tenant_name": "Other"}, key)

    assert other.status_code == 422


def test_a_verify_replay_is_a_409_naming_the_membership_and_keeps_no_token(anonymous):
    post(anonymous, "/v1/signup", SIGNUP, str(uuid.uuid4()))
    token, key = emailed_token("ada@example.com"), str(uuid.uuid4())
    created = post(anonymous, "/v1/signup/verify", {"token": token}, key)

    again = post(anonymous, "/v1/signup/verify", {"token": token}, key)

    assert created.status_code == 201
    assert again.status_code == 409
    assert again["Content-Type"] == "application/problem+json"
    assert "/v1/members/" in again.json()["detail"]
    assert created.json()["token"] not in again.content.decode()
    stored = OperationKey.objects.get(key=key)
    assert stored.tenant_id is None and stored.response_body is None


def test_public_keys_belong_to_their_route(anonymous):
    key = str(uuid.uuid4())
    post(anonymous, "/v1/signup", SIGNUP, key)

    verify = post(anonymous, "/v1/signup/verify", {"token": "unknown"}, key)

    # Not a 422 for "the same key with another request": another route, another key.
    assert verify.status_code == 400
    assert verify.json()["type"].endswith("/invalid-token")
