"""The demo's webhook receiver accepts exactly what the endpoint's secret signed."""

import base64
import json
from datetime import UTC, datetime

from standardwebhooks import Webhook

from operations.demo.receiver import describe, verified_event

SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()
OTHER = "whsec_" + base64.b64encode(b"o" * 32).decode()
BODY = json.dumps({"type": "notification.fired", "data": {"subject": "Hi"}}).encode()


def signed_headers(secret: str, body: bytes = BODY) -> dict[str, str]:
    now = datetime.now(tz=UTC)
    return {
        "webhook-id": "notification_x_1",
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign("notification_x_1", now, body.decode()),
    }


def test_a_delivery_signed_with_one_of_the_secrets_is_verified():
    event = verified_event(BODY, signed_headers(SECRET), [OTHER, SECRET])

    assert event == {"type": "notification.fired", "data": {"subject": "Hi"}}
    assert describe(event, "notification_x_1") == (
        'verified webhook-id=notification_x_1 type=notification.fired subject="Hi"'
    )


def test_a_delivery_signed_otherwise_or_altered_is_not():
    assert verified_event(BODY, signed_headers(OTHER), [SECRET]) is None
    assert verified_event(BODY + b" ", signed_headers(SECRET), [SECRET]) is None
    assert verified_event(BODY, signed_headers(SECRET), []) is None
