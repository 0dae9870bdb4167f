"""One-click unsubscribe (RFC 8058): the List-Unsubscribe headers of an email to a
recipient, the token its link carries, and what presenting it does.

The token is signed, never stored (DESIGN §11): it names (tenant, recipient key, category)
and carries an HMAC of them keyed with SECRET_KEY, so the server checks it without a row,
and nobody without the key can forge one. What an email stores (a recorded Resend batch,
the row) holds only the reference `{{unsubscribe:<payload>}}`; the engine renders the token
into the header when it hands the email to its transport (delivery.header_tokens).
"""

import base64
import binascii
import hmac
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

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
# json.dumps with any argument builds a new encoder per call; the tick builds a payload
# per email.
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))


def _payload(tenant_id: Any, key: str, category: str) -> str:
    return b64(_COMPACT_JSON.encode([str(tenant_id), key, category]).encode())


def headers(
    *, tenant_id: Any, key: str, category: str, url: str | None = None
) -> tuple[tuple[str, str], ...]:
    """The RFC 8058 headers of an email to recipient `key`, as stored: a reference where
    the token goes. `url` is UNSUBSCRIBE_URL (the tick reads it once per claim)."""
    reference = header_tokens.reference(_payload(tenant_id, key, category))
    url = (url or settings.UNSUBSCRIBE_URL).replace("{token}", reference)
    return ((LIST_UNSUBSCRIBE, f"<{url}>"), (LIST_UNSUBSCRIBE_POST, ONE_CLICK))


def verify(token: str, *, secret: str) -> tuple[str, str, str] | None:
    """(tenant id, recipient key, category) the token was signed for, or None when it is
    not one this server signed."""
    payload, _, mac = token.rpartition(".")
    if not payload or len(mac) != MAC_CHARS or not token.isascii():
        return None
    if not hmac.compare_digest(mac, token_mac(payload, secret)):
        return None
    try:
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        tenant_id, key, category = json.loads(raw)
    except (ValueError, binascii.Error, TypeError):
        return None
    if not all(isinstance(part, str) for part in (tenant_id, key, category)):
        return None
    return tenant_id, key, category


def recipient_unsubscribe(*, token: str, now: datetime) -> Recipient:
    """Mute email of the token's category (all email when it names none) for its recipient;
    the same token again changes nothing. Raises InvalidToken for a token this server did
    not sign, or whose recipient no longer exists."""
    signed = verify(token, secret=settings.SECRET_KEY)
    if signed is None:
        raise InvalidToken
    tenant_id, key, category = signed
    with transaction.atomic():
        recipient = (
            Recipient.objects.select_for_update().filter(tenant_id=tenant_id, key=key).first()
        )
        if recipient is None:
            raise InvalidToken
        recipient.preferences = muted(recipient.preferences, category=category)
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
