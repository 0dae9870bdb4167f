"""send_webhook against real HTTP servers on 127.0.0.1 (private targets allowed for tests)."""

import pytest
from standardwebhooks import Webhook

from delivery.transports.base import WebhookMessage
from delivery.transports.signing import generate_secret
from delivery.transports.webhook import send_webhook
from tests.support.http_server import Reply, recording_server

PAYLOAD = {"type": "notification.fired", "data": {"notification_id": 3, "occurrence": 2}}


@pytest.fixture(autouse=True)
def private_targets_allowed(settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True


def deliver(url, *, secret=None, timeout=2.0):
    message = WebhookMessage(
        url=url,
        secrets=(secret or generate_secret(),),
        msg_id="notification_3_2",
        payload=PAYLOAD,
    )
    return send_webhook(message, timeout=timeout)


def test_200_is_delivered_with_a_verifiable_signature():
    secret = generate_secret()
    with recording_server(lambda request: Reply(200)) as server:
        result = deliver(f"{server.url}/hook", secret=secret)
    assert (result.ok, result.http_status) == (True, 200)
    [received] = server.received("/hook")
    assert received.headers["webhook-id"] == "notification_3_2"
    assert Webhook(secret).verify(received.body, received.headers) == PAYLOAD


def test_500_is_transient():
    with recording_server(lambda request: Reply(500)) as server:
        result = deliver(f"{server.url}/hook")
    assert (result.ok, result.permanent, result.category, result.http_status) == (
        False,
        False,
        "http_5xx",
        500,
    )


def test_410_marks_the_endpoint_gone():
    with recording_server(lambda request: Reply(410)) as server:
        result = deliver(f"{server.url}/hook")
    assert (result.ok, result.permanent, result.gone) == (False, True, True)


def test_redirect_is_not_followed_and_is_a_permanent_failure():
    def responder(request):
        if request.path == "/hook":
            return Reply(302, {"Location": "/target"})
        return Reply(200)

    with recording_server(responder) as server:
        result = deliver(f"{server.url}/hook")
        assert server.received("/target") == []
    assert (result.ok, result.permanent, result.category, result.http_status) == (
        False,
        True,
        "http_3xx",
        302,
    )


def test_retry_after_is_honoured():
    with recording_server(lambda request: Reply(429, {"Retry-After": "45"})) as server:
        result = deliver(f"{server.url}/hook")
    assert (result.ok, result.permanent, result.retry_after) == (False, False, 45)


def test_hung_endpoint_is_cut_at_the_timeout():
    with recording_server(lambda request: Reply(delay=5)) as server:
        result = deliver(f"{server.url}/hook", timeout=0.5)
    assert (result.ok, result.permanent, result.category) == (False, False, "timeout")
    assert len(server.received("/hook")) == 1


def test_large_response_body_does_not_matter():
    with recording_server(lambda request: Reply(200, body=b"x" * 5_000_000)) as server:
        result = deliver(f"{server.url}/hook")
    assert result.ok
