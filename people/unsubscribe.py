"""One-click unsubscribe (RFC 8058): the List-Unsubscribe headers and the footer link of an
email to a recipient, the token they carry, and what presenting it does.

The token is opaque and bound to the person, not to the tenant's key for them: its payload
is sealed (AES-256-GCM under a key derived from SECRET_KEY, a new nonce per email) over
the tenant, the recipient's row id and the category, so nobody reads whom it names, and a
recipient deleted and re-created under the same key is another row that an old token does
not reach. A token whose recipient no longer exists mutes nobody and answers like a
success (idempotent: the person is unsubscribed from nothing).

The token is never stored (DESIGN §11): what an email stores (a recorded Resend batch, the
row) holds the reference `{{unsubscribe:<sealed payload>}}`, and the engine renders
`<payload>.<HMAC of it keyed with SECRET_KEY>` when it hands the email to its transport
(delivery.header_tokens), the same bytes on every retry. Only this server can seal a
payload, so a reference a client writes into a body renders nothing it could not have had.
"""

import base64
import binascii
import hmac
import json
import os
import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.db import transaction

from delivery import header_tokens
from delivery.header_tokens import MAC_CHARS, b64, token_mac
from delivery.models import Channel
from people.models import Recipient
from tenancy.link_tokens import InvalidToken

LIST_UNSUBSCRIBE = "List-Unsubscribe"
LIST_UNSUBSCRIBE_POST = "List-Unsubscribe-Post"
ONE_CLICK = "List-Unsubscribe=One-Click"
_INFO = b"tickwork.unsubscribe.v1"
_NONCE_BYTES = 12
# The sealed plain text: the tenant's UUID (16 bytes), the recipient's row id (8), then
# the category's UTF-8 (0 to 64 characters).
_IDS = struct.Struct(">16sQ")


@dataclass(frozen=True)
class Unsubscribe:
    """What a token unsubscribes: a recipient (by tenant and row id) from a category ("":
    all email)."""

    tenant_id: uuid.UUID
    recipient_id: int
    category: str


@lru_cache(maxsize=4)
def _cipher(secret: str) -> AESGCM:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(secret.encode())
    return AESGCM(key)


def sealed_payload(*, tenant_id: Any, recipient_id: int, category: str) -> str:
    """The opaque payload of a token to `recipient_id` for `category`, base64url."""
    plain = _IDS.pack(uuid.UUID(str(tenant_id)).bytes, recipient_id) + category.encode()
    nonce = os.urandom(_NONCE_BYTES)
    return b64(nonce + _cipher(settings.SECRET_KEY).encrypt(nonce, plain, _INFO))


def link(*, tenant_id: Any, recipient_id: int, category: str, url: str | None = None) -> str:
    """The unsubscribe URL of an email to the recipient, as stored: a reference where the
    token goes. `url` is UNSUBSCRIBE_URL (the tick reads it once per claim)."""
    payload = sealed_payload(tenant_id=tenant_id, recipient_id=recipient_id, category=category)
    reference = header_tokens.reference(payload)
    return (url or settings.UNSUBSCRIBE_URL).replace("{token}", reference)


def headers(unsubscribe_url: str) -> tuple[tuple[str, str], ...]:
    """The RFC 8058 headers of an email whose unsubscribe link is `unsubscribe_url`."""
    return ((LIST_UNSUBSCRIBE, f"<{unsubscribe_url}>"), (LIST_UNSUBSCRIBE_POST, ONE_CLICK))


def footer(unsubscribe_url: str) -> str:
    """The text an email's body ends with: the link to a page that unsubscribes."""
    return f"\n\n--\nTo stop receiving these emails, open {unsubscribe_url}\n"


def verify(token: str, *, secret: str) -> Unsubscribe | None:
    """What the token unsubscribes, or None when it is not one this server made."""
    payload, _, mac = token.rpartition(".")
    if not payload or len(mac) != MAC_CHARS or not token.isascii():
        return None
    if not hmac.compare_digest(mac, token_mac(payload, secret)):
        return None
    try:
        sealed = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        nonce, box = sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:]
        plain = _cipher(secret).decrypt(nonce, box, _INFO)
        tenant_bytes, recipient_id = _IDS.unpack_from(plain)
        category = plain[_IDS.size :].decode()
    except (ValueError, binascii.Error, InvalidTag, struct.error):
        return None
    return Unsubscribe(uuid.UUID(bytes=tenant_bytes), recipient_id, category)


def verified(token: str) -> Unsubscribe:
    """What the token unsubscribes; raises InvalidToken for one this server did not make."""
    found = verify(token, secret=settings.SECRET_KEY)
    if found is None:
        raise InvalidToken
    return found


def recipient_unsubscribe(*, token: str, now: datetime) -> Recipient | None:
    """Mute email of the token's category (all email when it names none) for its recipient;
    the same token again changes nothing. None when that recipient no longer exists (a
    recipient re-created under the same key is another one). Raises InvalidToken for a
    token this server did not make."""
    wanted = verified(token)
    with transaction.atomic():
        recipient = (
            Recipient.objects.select_for_update()
            .filter(tenant_id=wanted.tenant_id, pk=wanted.recipient_id)
            .first()
        )
        if recipient is None:
            return None
        recipient.preferences = muted(recipient.preferences, category=wanted.category)
        recipient.updated_at = now
        recipient.save(update_fields=["preferences", "updated_at"])
    return recipient


def muted(preferences: Mapping[str, Any], *, category: str) -> dict[str, Any]:
    """`preferences` with email of `category` turned off (all email when category is "")."""
    changed = json.loads(json.dumps(preferences or {}))
    if category:
        categories = changed.setdefault("categories", {})
        categories.setdefault(category, {})[Channel.EMAIL] = False
    else:
        changed.setdefault("channels", {})[Channel.EMAIL] = False
    return changed
