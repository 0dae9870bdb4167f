"""Resend batches (POST /emails/batch): request shape, per-email answers and Resend's error
classes."""

import json
import logging

import pytest
import requests
import responses

from delivery.transports.base import EmailMessage
from delivery.transports.resend import batch_body, send_batch
from tests.support.http_server import Reply, recording_server

KEY = "re_test_0123456789abcdef"
API = "https://api.resend.test"
MESSAGES = [
    EmailMessage(
        to=("ada@example.com", "bob@example.com"),
        subject="Reminder",
        body="It is time.",
        idempotency_key="notification_12_3",
    ),
    EmailMessage(to=("eve@example.com",), subject="Ünïcode", body="B", idempotency_key="x"),
]


@pytest.fixture
def resend(settings):
    settings.RESEND_API_KEY = KEY
    settings.RESEND_API_URL = API
    settings.NOTIFICATIONS_EMAIL_FROM = "Tickwork <noreply@example.com>"
    with responses.RequestsMock() as mock:
        yield mock


def send(key: str = "batch_1"):
    return send_batch(body=batch_body(MESSAGES), size=len(MESSAGES), key=key, timeout=5)


def error_reply(mock, status, name, headers=None):
    body = json.dumps({"statusCode": status, "name": name, "message": f"{KEY} echoed"})
    mock.post(f"{API}/emails/batch", status=status, body=body, headers=headers or {})


def test_a_batch_carries_key_user_agent_idempotency_key_and_permissive_mode(resend):
    resend.post(f"{API}/emails/batch", json={"data": [{"id": "a"}, {"id": "b"}]})
    answer = send()
    assert [(r.ok, r.http_status, r.error) for r in answer.results] == [(True, 200, "")] * 2
    assert answer.hold_seconds is None
    request = resend.calls[0].request
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    assert request.headers["User-Agent"] == "Tickwork/1.0"
    assert request.headers["Idempotency-Key"] == "batch_1"
    assert request.headers["x-batch-validation"] == "permissive"
    assert request.headers["Content-Type"] == "application/json"
    assert json.loads(request.body) == [
        {
            "from": "Tickwork <noreply@example.com>",
            "to": ["ada@example.com", "bob@example.com"],
            "subject": "Reminder",
            "text": "It is time.",
        },
        {
            "from": "Tickwork <noreply@example.com>",
            "to": ["eve@example.com"],
            "subject": "Ünïcode",
            "text": "B",
        },
    ]


def test_the_recorded_body_is_sent_byte_for_byte(resend):
    resend.post(f"{API}/emails/batch", json={"data": [{"id": "a"}, {"id": "b"}]})
    body = batch_body(MESSAGES)
    send_batch(body=body, size=2, key="k", timeout=5)
    assert resend.calls[0].request.body == body.encode()


def test_per_email_errors_of_a_permissive_batch_fail_those_emails_alone(resend):
    errors = [{"index": 1, "message": "Invalid `to` field."}]
    resend.post(f"{API}/emails/batch", json={"data": [{"id": "a"}], "errors": errors})
    first, second = send().results
    assert (first.ok, second.ok) == (True, False)
    assert (second.permanent, second.category) == (True, "invalid_request")
    assert "Invalid" not in second.error  # the provider's text is not stored


@pytest.mark.parametrize(
    ("headers", "hold"),
    [
        ({"ratelimit-limit": "2", "ratelimit-remaining": "0", "ratelimit-reset": "1"}, 0.5),
        ({"ratelimit-limit": "1", "ratelimit-remaining": "0", "ratelimit-reset": "3"}, 3),
        ({"ratelimit-remaining": "0", "ratelimit-reset": "2"}, 2),
        ({"ratelimit-limit": "2", "ratelimit-remaining": "1", "ratelimit-reset": "1"}, None),
        ({}, None),
    ],
)
def test_a_spent_budget_holds_senders_for_one_request_of_the_providers_rate(resend, headers, hold):
    resend.post(f"{API}/emails/batch", json={"data": [{"id": "a"}, {"id": "b"}]}, headers=headers)
    assert send().hold_seconds == hold


def test_a_429_is_backpressure_for_every_email_and_holds_the_budget(resend):
    error_reply(resend, 429, "rate_limit_exceeded", headers={"Retry-After": "3"})
    answer = send()
    assert answer.hold_seconds == 3
    assert all(r.backpressure and r.retry_after == 3 and not r.permanent for r in answer.results)


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
def test_resend_error_classes_apply_to_every_email_of_the_batch(
    resend, status, name, permanent, category
):
    error_reply(resend, status, name)
    for result in send().results:
        assert (result.ok, result.permanent, result.category) == (False, permanent, category)
        assert result.http_status == status
        assert result.error == f"Resend answered HTTP {status} ({name})"


def test_retries_of_a_batch_reuse_its_key(resend):
    error_reply(resend, 500, "internal_server_error")
    send()
    send()
    keys = [call.request.headers["Idempotency-Key"] for call in resend.calls]
    assert keys == ["batch_1", "batch_1"]


def test_unparseable_error_body_still_classifies_by_status(resend):
    resend.post(f"{API}/emails/batch", status=502, body=b"<html>Bad gateway</html>")
    result = send().results[0]
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
    resend.post(f"{API}/emails/batch", body=error)
    for result in send().results:
        assert (result.ok, result.permanent, result.category) == (False, False, category)


def test_key_never_reaches_errors_or_logs(resend, caplog):
    resend.post(f"{API}/emails/batch", body=RuntimeError(f"unexpected: Bearer {KEY}"))
    with caplog.at_level(logging.DEBUG):
        results = send().results
    assert {(r.ok, r.category) for r in results} == {(False, "internal")}
    assert "RuntimeError" in caplog.text
    assert KEY not in caplog.text
    assert all(KEY not in r.error for r in results)


def test_a_real_local_server_receives_the_batch(settings):
    settings.RESEND_API_KEY = KEY
    reply = Reply(200, body=b'{"data":[{"id":"e-1"},{"id":"e-2"}]}')
    with recording_server(lambda request: reply) as server:
        settings.RESEND_API_URL = server.url
        answer = send_batch(body=batch_body(MESSAGES), size=2, key="batch_9", timeout=2)
    assert [r.ok for r in answer.results] == [True, True]
    [received] = server.received("/emails/batch")
    assert received.method == "POST"
    assert received.headers["authorization"] == f"Bearer {KEY}"
    assert received.headers["idempotency-key"] == "batch_9"
    assert received.headers["user-agent"] == "Tickwork/1.0"
    assert [e["to"] for e in json.loads(received.body)] == [
        ["ada@example.com", "bob@example.com"],
        ["eve@example.com"],
    ]
