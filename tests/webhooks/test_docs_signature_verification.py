"""The webhook verification snippet of docs/api.md, run as printed against real deliveries of
our webhook channel: a receiver that copies it accepts what we send and rejects the rest."""

import re

import pytest
from django.test import RequestFactory

from delivery.transports.base import WebhookMessage
from delivery.transports.signing import generate_secret
from delivery.transports.webhook import send_webhook
from tests.support.http_server import recording_server
from tests.support.processes import ROOT

PLACEHOLDER = '"whsec_..."'


def readme_view(secret: str):
    """The docs' view, with the endpoint's secret in place of its placeholder."""
    readme = (ROOT / "docs" / "api.md").read_text()
    section = readme.split("## Verifying a webhook signature\n", 1)[1].split("\n## ", 1)[0]
    [code] = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert PLACEHOLDER in code
    namespace: dict = {}
    exec(code.replace(PLACEHOLDER, repr(secret)), namespace)  # noqa: S102 - our own docs
    return namespace["tickwork_events"]


@pytest.fixture
def delivery(settings):
    """One real delivery, signed during a rotation: (current secret, previous secret,
    recorded request)."""
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    current, previous = generate_secret(), generate_secret()
    payload = {"type": "project.activated", "data": {"name": "Relaunch ü"}}
    with recording_server() as server:
        result = send_webhook(
            WebhookMessage(
                url=server.url,
                secrets=(current, previous),
                msg_id="notification_42_7",
                payload=payload,
            ),
            timeout=5,
        )
        [request] = server.received()
    assert result.ok
    return current, previous, request


def post(request, *, body: bytes | None = None):
    headers = {k: v for k, v in request.headers.items() if k.startswith("webhook-")}
    return RequestFactory().post(
        "/hooks/tickwork",
        data=request.body if body is None else body,
        content_type="application/json",
        headers=headers,
    )


def test_the_snippet_accepts_a_delivery_with_either_secret_of_a_rotation(delivery):
    current, previous, request = delivery

    assert readme_view(current)(post(request)).status_code == 204
    assert readme_view(previous)(post(request)).status_code == 204


def test_the_snippet_rejects_another_secret_and_an_altered_body(delivery):
    current, _, request = delivery

    assert readme_view(generate_secret())(post(request)).status_code == 400
    altered = request.body.replace(b"Relaunch", b"Takeover")
    assert altered != request.body
    assert readme_view(current)(post(request, body=altered)).status_code == 400
