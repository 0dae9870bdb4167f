"""Link references in an email's headers, rendered into signed tokens when the email goes out.

What an email stores (a recorded Resend batch, the row) holds only a reference,
`{{unsubscribe:<payload>}}`; the engine renders `<payload>.<HMAC of it keyed with
SECRET_KEY>` into the header when it hands the email to its transport, the same bytes on
every retry. References are rendered in headers and in the footer the engine adds to a body
(EmailMessage.footer), never in the text a client wrote, so no caller can have the server
mail them a token it could not have made. Which payloads exist
and what a presented token does belong to the product that issues them (people.unsubscribe).
"""

import binascii
import functools
import hmac
import re
from collections.abc import Mapping

from django.conf import settings

_REFERENCE = re.compile(r"\{\{unsubscribe:([A-Za-z0-9_-]{1,2000})\}\}")
_CONTEXT = b"tickwork.unsubscribe:"
MAC_CHARS = 43  # 256 bits, base64url without padding
_URL_SAFE = bytes.maketrans(b"+/", b"-_")


def b64(raw: bytes) -> str:
    """base64url without padding, straight from binascii: the tick encodes two per email."""
    return binascii.b2a_base64(raw, newline=False).translate(_URL_SAFE).rstrip(b"=").decode()


@functools.lru_cache(maxsize=4)
def _keyed(secret: str) -> hmac.HMAC:
    """HMAC-SHA256 keyed with `secret` over the context, copied for each token: the
    one-shot hmac.digest() lets go of the GIL on every call, which in the tick hands the
    interpreter to another thread once per email."""
    return hmac.new(secret.encode(), _CONTEXT, "sha256")


def token_mac(payload: str, secret: str) -> str:
    """The token's signature over `payload`, base64url."""
    keyed = _keyed(secret).copy()
    keyed.update(payload.encode())
    return b64(keyed.digest())


def reference(payload: str) -> str:
    """The reference to a token over `payload`, as an email stores it."""
    return "{{unsubscribe:" + payload + "}}"


def render(value: str, *, secret: str) -> str:
    """A header value with its references replaced by their tokens."""
    if "{{unsubscribe:" not in value:
        return value
    return _REFERENCE.sub(lambda m: f"{m[1]}.{token_mac(m[1], secret)}", value)


def rendered(value: str) -> str:
    """A header value, or an email's footer, as it goes out: tokens rendered with
    SECRET_KEY."""
    return render(value, secret=settings.SECRET_KEY)


def rendered_headers(pairs: Mapping[str, str]) -> dict[str, str]:
    """Headers as they go out: tokens rendered with SECRET_KEY."""
    secret = settings.SECRET_KEY
    return {name: render(value, secret=secret) for name, value in pairs.items()}
