"""send_email through the Resend API: request shape and Resend's error classes."""

import json
import logging

import pytest
import requests
import responses

from notifications.transports.base import EmailMessage
from notifications.transports.email import send_email
from tests.support.http_server import Reply, recording_server

KEY = "re_test_0123456789abcdef"
API = "https://api.resend.test"
MESSAGE = EmailMessage(
    to=("ada@example.com", "bob@example.com"),
    subject="Reminder",
    body="It is time.",
    idempotency_key="notification_12_3",
)


@pytest.fixture
def resend(settings):
    settings.RESEND_API_KEY = KEY
    settings.RESEND_API_URL = API
    settings.NOTIFICATIONS_EMAIL_FROM = "Tickwork <noreply@example.com>"
    with responses.RequestsMock() as mock:
        yield mock


def error_reply(mock, status, name, headers=None):
    body = json.dumps({"statusCode": status, "name": name, "message": f"{KEY} echoed"})
    mock.post(f"{API}/emails", status=status, body=body, headers=headers or {})


def test_sent_email_carries_key_user_agent_and_idempotency_key(resend):
    resend.post(f"{API}/emails", status=200, json={"id": "49a3999c"})
    result = send_email(MESSAGE, timeout=5)
    assert (result.ok, result.http_status, result.error) == (True, 200, "")
    request = resend.calls[0].request
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    assert request.headers["User-Agent"] == "Tickwork/1.0"
    assert request.headers["Idempotency-Key"] == "notification_12_3"
    assert request.headers["Content-Type"] == "application/json"
    assert json.loads(request.body) == {
        "from": "Tickwork <noreply@example.com>",
        "to": ["ada@example.com", "bob@example.com"],
        "subject": "Reminder",
        "text": "It is time.",
    }


def test_retries_reuse_the_idempotency_key(resend):
    error_reply(resend, 500, "internal_server_error")
    send_email(MESSAGE, timeout=5)
    send_email(MESSAGE, timeout=5)
    keys = [call.request.headers["Idempotency-Key"] for call in resend.calls]
    assert keys == ["notification_12_3", "notification_12_3"]


@pytest.mark.parametrize(
    ("status", "name", "permanent", "category"),
    [
        (400, "validation_error", True, "http_4xx"),
        (401, "missing_api_key", True, "http_4xx"),
        (403, "invalid_api_key", True, "http_4xx"),
        (422, "invalid_parameter", True, "http_4xx"),
        (409, "invalid_idempotent_request", True, "http_4xx"),
        (409, "concurrent_idempotent_requests", False, "http_4xx"),
        (429, "rate_limit_exceeded", False, "http_4xx"),
        (500, "application_error", False, "http_5xx"),
        (503, "internal_server_error", False, "http_5xx"),
    ],
)
def test_resend_error_classes(resend, status, name, permanent, category):
    error_reply(resend, status, name)
    result = send_email(MESSAGE, timeout=5)
    assert (result.ok, result.permanent, result.category) == (False, permanent, category)
    assert result.http_status == status
    assert result.error == f"Resend answered HTTP {status} ({name})"


def test_rate_limit_retry_after_is_reported(resend):
    error_reply(resend, 429, "rate_limit_exceeded", headers={"Retry-After": "2"})
    result = send_email(MESSAGE, timeout=5)
    assert (result.permanent, result.retry_after) == (False, 2)


def test_unparseable_error_body_still_classifies_by_status(resend):
    resend.post(f"{API}/emails", status=502, body=b"<html>Bad gateway</html>")
    result = send_email(MESSAGE, timeout=5)
    assert (result.permanent, result.category, result.error) == (
        False,
        "http_5xx",
        "Resend answered HTTP 502",
    )


@pytest.mark.parametrize(
    ("error", "category"),
    [(requests.ReadTimeout(), "timeout"), (requests.ConnectionError(), "connection")],
)
def test_network_errors_are_retried(resend, error, category):
    resend.post(f"{API}/emails", body=error)
    result = send_email(MESSAGE, timeout=5)
    assert (result.ok, result.permanent, result.category) == (False, False, category)


def test_key_never_reaches_errors_or_logs(resend, caplog):
    resend.post(f"{API}/emails", body=RuntimeError(f"unexpected: Bearer {KEY}"))
    with caplog.at_level(logging.DEBUG):
        result = send_email(MESSAGE, timeout=5)
    assert (result.ok, result.category) == (False, "internal")
    assert "RuntimeError" in caplog.text
    assert KEY not in caplog.text
    assert KEY not in result.error


def test_fake_resend_server_receives_the_post(settings):
    settings.RESEND_API_KEY = KEY
    with recording_server(lambda request: Reply(200, body=b'{"id":"e-1"}')) as server:
        settings.RESEND_API_URL = server.url
        result = send_email(MESSAGE, timeout=2)
    assert result.ok
    [received] = server.received("/emails")
    assert received.method == "POST"
    assert received.headers["authorization"] == f"Bearer {KEY}"
    assert received.headers["idempotency-key"] == "notification_12_3"
    assert received.headers["user-agent"] == "Tickwork/1.0"
    assert json.loads(received.body)["to"] == ["ada@example.com", "bob@example.com"]
    assert json.loads(received.body)["text"] == "It is time."
