"""Link tokens: the single-use secrets an email link carries (signup, invitation and signin
today; unsubscribe links are meant to use the same three functions). No live token is
ever at rest: not on the row it opens, not in the stored email, not in a recorded batch.

A token is derived, never stored:

    token = base64url(HMAC-SHA256(SECRET_KEY, "tickwork.link:<purpose>:<recipients>:<nonce>"))

`nonce` is 128 random bits drawn when the link is issued, `recipients` the exact address
list the email goes to. The row the link opens keeps `sha256(token)` (looked up as before);
the stored email keeps, where the token goes, the reference `{{link:<purpose>:<nonce>}}`.
The tick turns references into tokens (`render`) when it hands the email to its transport,
from the message's own recipients, and keeps nothing it rendered. Rendering is a pure
function of the stored bytes and SECRET_KEY, so every retry sends the same bytes (a Resend
batch goes again identical under its idempotency key).

Why each part:
- SECRET_KEY: a database dump, the admin and the delivery log hold digests, nonces and
  addresses, and none of those gives a token back.
- the recipients: anyone who reads a reference (a support agent, a dump) and can queue an
  email (any API caller can) could otherwise have the server render a live token to an
  address of theirs. The token rendered for any other recipient list opens nothing.
- the nonce in the reference, not looked up on the row: a re-issued link (an invitation
  sent again) gets a new nonce and digest, and the older email, if it is retried, still
  renders its own token, now dead, in the bytes of its first attempt.

Rotating SECRET_KEY turns every link not yet used into a dead one (re-send invitations);
an email queued but not yet sent then goes out with a dead link.

Pure functions: callers pass the secret in.
"""

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from web.errors import DomainError

PURPOSES = ("signup", "invitation", "signin", "unsubscribe")
_NONCE_BYTES = 16
_REFERENCE = re.compile(r"\{\{link:(" + "|".join(PURPOSES) + r"):([A-Za-z0-9_-]{22})\}\}")
_MARK = "{{link:"


class InvalidToken(DomainError):
    """Used, revoked, expired or unknown: one answer, so a caller learns nothing of which."""

    kind = "invalid-token"

    def __init__(self) -> None:
        super().__init__("The token is invalid, expired or already used.")


@dataclass(frozen=True)
class IssuedLink:
    """What an issued link leaves behind: the `reference` its email's body holds where the
    token goes, and the `digest` its row stores."""

    reference: str
    digest: str


def issue(purpose: str, *, recipients: Sequence[str], secret: str) -> IssuedLink:
    """A new link for `purpose` emailed to exactly `recipients`."""
    if purpose not in PURPOSES:
        raise ValueError(f"unknown link purpose {purpose!r}")
    nonce = secrets.token_urlsafe(_NONCE_BYTES)
    token = derive(purpose, nonce, recipients=recipients, secret=secret)
    return IssuedLink(reference=f"{_MARK}{purpose}:{nonce}}}}}", digest=digest(token))


def derive(purpose: str, nonce: str, *, recipients: Sequence[str], secret: str) -> str:
    """The token a reference stands for in an email to `recipients`."""
    message = f"tickwork.link:{purpose}:{','.join(recipients)}:{nonce}".encode()
    mac = hmac.new(secret.encode(), message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


def digest(token: str) -> str:
    """What a row stores for its token, and what a presented token is looked up by. The
    token is 256 bits of HMAC output, so a fast hash is safe; it is never a password."""
    return hashlib.sha256(token.encode()).hexdigest()


def render(text: str, *, recipients: Sequence[str], secret: str) -> str:
    """`text` with every link reference replaced by its token for `recipients`; text
    without one comes back as it is."""
    if _MARK not in text:
        return text
    return _REFERENCE.sub(lambda m: derive(m[1], m[2], recipients=recipients, secret=secret), text)
