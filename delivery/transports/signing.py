"""Standard Webhooks signatures (https://www.standardwebhooks.com/). Pure: no I/O.

signature = base64(HMAC-SHA256(key, f"{msg_id}.{timestamp}.".encode() + body)) where the key
is the base64-decoded secret without its "whsec_" prefix. Signing the exact bytes sent (not
a re-serialisation) is what lets any reference verifier accept the delivery.
"""

import base64
import binascii
import hashlib
import hmac
from collections.abc import Sequence
from secrets import token_bytes

SECRET_PREFIX = "whsec_"  # noqa: S105 - the public format marker, not a secret
SECRET_BYTES = 32
MIN_SECRET_BYTES = 24
MAX_SECRET_BYTES = 64


def generate_secret() -> str:
    """A new signing secret: "whsec_" + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(token_bytes(SECRET_BYTES)).decode("ascii")


def secret_key(secret: str) -> bytes:
    """The HMAC key of a "whsec_..." secret. Raises ValueError (without echoing the secret)
    unless it is base64 of 24 to 64 bytes."""
    encoded = secret.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("webhook secret is not valid base64") from None
    if not MIN_SECRET_BYTES <= len(key) <= MAX_SECRET_BYTES:
        raise ValueError(
            f"webhook secret must encode {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes"
        )
    return key


def sign(*, secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """The webhook-signature header value: "v1,<base64>" per secret, space-separated, in the
    order given (current secret first during a rotation). Raises ValueError for no secrets
    or a malformed one."""
    if not secrets:
        raise ValueError("at least one webhook secret is required")
    signed_content = f"{msg_id}.{timestamp}.".encode() + body
    signatures = []
    for secret in secrets:
        digest = hmac.new(secret_key(secret), signed_content, hashlib.sha256).digest()
        signatures.append("v1," + base64.b64encode(digest).decode("ascii"))
    return " ".join(signatures)
