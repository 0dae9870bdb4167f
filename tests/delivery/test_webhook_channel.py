"""send_webhook with the HTTP boundary mocked by `responses`: headers, signatures and every
classification branch."""

import json
import socket
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
import requests
import responses
from standardwebhooks import Webhook

from delivery.transports.base import WebhookMessage
from delivery.transports.signing import generate_secret
from delivery.transports.webhook import send_webhook
from tests.support.resolvers import fake_resolver

URL = "https://hooks.example.com/hook?token=s3cret"
PAYLOAD = {"type": "notification.fired", "data": {"notification_id": 7, "subject": "Zürich"}}


def make_message(*, url=URL, secrets=None, msg_id="notification_7_1", payload=PAYLOAD):
    return WebhookMessage(
        url=url, secrets=tuple(secrets or [generate_secret()]), msg_id=msg_id, payload=payload
    )


@pytest.fixture
def private_allowed(settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True


@pytest.fixture
def mocked():
    with responses.RequestsMock() as mock:
        yield mock


def test_delivery_is_signed_and_verifiable_with_both_rotation_secrets(private_allowed, mocked):
    mocked.post(URL, status=204)
    current, previous = generate_secret(), generate_secret()
    result = send_webhook(make_message(secrets=[current, previous]), timeout=5)
    assert (result.ok, result.http_status, result.category, result.error) == (True, 204, "", "")
    request = mocked.calls[0].request
    assert request.headers["content-type"] == "application/json"
    assert request.headers["user-agent"] == "Tickwork/1.0"
    assert request.headers["webhook-id"] == "notification_7_1"
    assert request.body == json.dumps(PAYLOAD, separators=(",", ":")).encode()
    for secret in (current, previous):
        assert Webhook(secret).verify(request.body, dict(request.headers)) == PAYLOAD


def test_webhook_id_is_identical_on_every_retry(private_allowed, mocked):
    mocked.post(URL, status=500)
    message = make_message()
    send_webhook(message, timeout=5)
    send_webhook(message, timeout=5)
    ids = [call.request.headers["webhook-id"] for call in mocked.calls]
    assert ids == ["notification_7_1", "notification_7_1"]


@pytest.mark.parametrize(
    ("status", "permanent", "category"),
    [
        (301, True, "http_3xx"),
        (302, True, "http_3xx"),
        (307, True, "http_3xx"),
        (400, True, "http_4xx"),
        (401, True, "http_4xx"),
        (404, True, "http_4xx"),
        (422, True, "http_4xx"),
        (408, False, "http_4xx"),
        (425, False, "http_4xx"),
        (429, False, "http_4xx"),
        (500, False, "http_5xx"),
        (502, False, "http_5xx"),
        (503, False, "http_5xx"),
    ],
)
def test_status_classification(private_allowed, mocked, status, permanent, category):
    mocked.post(URL, status=status)
    result = send_webhook(make_message(), timeout=5)
    assert (result.ok, result.permanent, result.category) == (False, permanent, category)
    assert (result.http_status, result.gone) == (status, False)
    assert str(status) in result.error
    assert "s3cret" not in result.error


def test_410_gone_is_permanent_and_disables_the_endpoint(private_allowed, mocked):
    mocked.post(URL, status=410)
    result = send_webhook(make_message(), timeout=5)
    assert (result.ok, result.permanent, result.gone, result.http_status) == (
        False,
        True,
        True,
        410,
    )


def test_retry_after_in_seconds_and_as_a_date(private_allowed, mocked):
    mocked.post(URL, status=429, headers={"Retry-After": "120"})
    assert send_webhook(make_message(), timeout=5).retry_after == 120
    mocked.replace(
        responses.POST,
        URL,
        status=503,
        headers={"Retry-After": format_datetime(datetime.now(UTC) + timedelta(seconds=600))},
    )
    assert 590 <= send_webhook(make_message(), timeout=5).retry_after <= 600


def test_retry_after_is_ignored_outside_429_and_503(private_allowed, mocked):
    mocked.post(URL, status=500, headers={"Retry-After": "120"})
    assert send_webhook(make_message(), timeout=5).retry_after is None


@pytest.mark.parametrize(
    ("error", "category"),
    [(requests.ConnectTimeout(), "timeout"), (requests.ConnectionError(), "connection")],
)
def test_network_failures_are_transient(private_allowed, mocked, error, category):
    mocked.post(URL, body=error)
    result = send_webhook(make_message(), timeout=5)
    assert (result.ok, result.permanent, result.category) == (False, False, category)
    assert "s3cret" not in result.error


def test_private_target_is_blocked_before_any_request(settings, mocked, monkeypatch):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    monkeypatch.setattr(socket, "getaddrinfo", fake_resolver({"hooks.example.com": ["10.0.0.7"]}))
    result = send_webhook(make_message(), timeout=5)
    assert (result.ok, result.permanent, result.category) == (False, True, "ssrf_blocked")
    assert len(mocked.calls) == 0


def test_plain_http_is_refused_at_delivery_unless_private_targets_allowed(settings, mocked):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    result = send_webhook(make_message(url="http://hooks.example.com/hook"), timeout=5)
    assert (result.ok, result.permanent, result.category) == (False, True, "ssrf_blocked")
    assert "https" in result.error
    assert len(mocked.calls) == 0


def test_malformed_secret_is_permanent_and_not_echoed(private_allowed, mocked):
    result = send_webhook(make_message(secrets=["whsec_short"]), timeout=5)
    assert (result.ok, result.permanent, result.category) == (False, True, "invalid_request")
    assert "short" not in result.error
    assert len(mocked.calls) == 0


def test_unexpected_failure_is_reported_not_raised(private_allowed, mocked):
    result = send_webhook(make_message(payload={"not json": object()}), timeout=5)
    assert (result.ok, result.category) == (False, "internal")
    assert isinstance(result.duration_ms, int)
