"""Standard Webhooks signing, checked against the reference `standardwebhooks` verifier."""

import base64
import time

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from delivery.transports.signing import generate_secret, sign

BODY = b'{"type":"notification.fired","data":{"notification_id":"42"}}'


def signed_headers(*, secrets, msg_id="notification_42_1", timestamp=None, body=BODY):
    timestamp = int(time.time()) if timestamp is None else timestamp
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secrets=secrets, msg_id=msg_id, timestamp=timestamp, body=body),
    }


def test_generated_secret_is_whsec_plus_32_random_bytes():
    secret = generate_secret()
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"))) == 32
    assert generate_secret() != secret


def test_reference_verifier_accepts_the_signature():
    secret = generate_secret()
    headers = signed_headers(secrets=[secret])
    assert headers["webhook-signature"].startswith("v1,")
    assert Webhook(secret).verify(BODY, headers) == {
        "type": "notification.fired",
        "data": {"notification_id": "42"},
    }


def test_during_rotation_both_the_current_and_previous_secret_verify():
    current, previous = generate_secret(), generate_secret()
    headers = signed_headers(secrets=[current, previous])
    assert len(headers["webhook-signature"].split(" ")) == 2
    Webhook(current).verify(BODY, headers)
    Webhook(previous).verify(BODY, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(generate_secret()).verify(BODY, headers)


def test_tampered_body_fails_verification():
    secret = generate_secret()
    headers = signed_headers(secrets=[secret])
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY.replace(b"42", b"43"), headers)


def test_other_msg_id_or_timestamp_fails_verification():
    secret = generate_secret()
    headers = signed_headers(secrets=[secret])
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY, {**headers, "webhook-id": "notification_42_2"})
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(
            BODY, {**headers, "webhook-timestamp": str(int(headers["webhook-timestamp"]) - 1)}
        )


def test_known_vector_is_stable():
    # Standard Webhooks' published example: same secret, id, timestamp and payload.
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    signature = sign(
        secrets=[secret],
        msg_id="msg_p5jXN8AQM9LWM0D4loKWxJek",
        timestamp=1614265330,
        body=b'{"test": 2432232314}',
    )
    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


@pytest.mark.parametrize("size", [24, 64])
def test_secrets_of_24_to_64_bytes_are_accepted(size):
    secret = "whsec_" + base64.b64encode(bytes(range(size))).decode()
    Webhook(secret).verify(BODY, signed_headers(secrets=[secret]))


@pytest.mark.parametrize(
    "secret",
    [
        "whsec_" + base64.b64encode(b"x" * 16).decode(),  # too short
        "whsec_" + base64.b64encode(b"x" * 65).decode(),  # too long
        "whsec_not*base64!",
    ],
)
def test_malformed_secrets_are_refused_without_echoing_them(secret):
    with pytest.raises(ValueError) as excinfo:
        sign(secrets=[secret], msg_id="m", timestamp=1, body=b"")
    assert secret.removeprefix("whsec_") not in str(excinfo.value)


def test_at_least_one_secret_is_required():
    with pytest.raises(ValueError, match="at least one"):
        sign(secrets=[], msg_id="m", timestamp=1, body=b"")
