"""Secrets the product must read back, sealed at rest (README: Account emails and secrets at rest).

A link token can be stored as a digest because the server only ever checks it; a webhook
signing secret cannot, because every delivery signs with it. Such a secret is stored sealed:
AES-256-GCM under a key derived (HKDF-SHA256) from SECRET_KEY, so a database dump, a replica
or a backup holds nothing that signs a webhook without the server's own key.

The stored form is ``sealed:v1:<key id>:<base64url(nonce | ciphertext | tag)>``. The key id
names which of SECRET_KEY and SECRET_KEY_FALLBACKS sealed it, so rotating SECRET_KEY the way
Django documents (the old key moves to the fallbacks) keeps every sealed value readable;
values are sealed again under the new key as they are next saved. Losing every key that
sealed a value loses the value: such an endpoint needs its secret rotated.
"""

import base64
import hashlib
import os
from functools import lru_cache
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.db import models

PREFIX = "sealed:v1:"
_INFO = b"tickwork.sealed.v1"
_NONCE_BYTES = 12


class UnsealError(ValueError):
    """A stored value that no configured key opens (or that was tampered with)."""


def seal(plain: str) -> str:
    """`plain` sealed under the current SECRET_KEY; a new nonce each time."""
    key_id, cipher = _ciphers()[0]
    nonce = os.urandom(_NONCE_BYTES)
    sealed = cipher.encrypt(nonce, plain.encode(), _INFO)
    return f"{PREFIX}{key_id}:{base64.urlsafe_b64encode(nonce + sealed).decode()}"


def unseal(stored: str) -> str:
    """The plain value of a sealed one; raises UnsealError when no configured key opens it."""
    if not is_sealed(stored):
        raise UnsealError("not a sealed value")
    key_id, _, payload = stored[len(PREFIX) :].partition(":")
    for candidate_id, cipher in _ciphers():
        if candidate_id == key_id:
            blob = base64.urlsafe_b64decode(payload)
            try:
                return cipher.decrypt(blob[:_NONCE_BYTES], blob[_NONCE_BYTES:], _INFO).decode()
            except Exception as exc:  # cryptography's InvalidTag: tampered, or another key
                raise UnsealError("the sealed value does not open") from exc
    raise UnsealError("sealed under a key that is neither SECRET_KEY nor a fallback")


def is_sealed(stored: str) -> bool:
    return stored.startswith(PREFIX)


def _ciphers() -> list[tuple[str, AESGCM]]:
    return _derived(settings.SECRET_KEY, tuple(getattr(settings, "SECRET_KEY_FALLBACKS", ())))


@lru_cache(maxsize=4)
def _derived(secret_key: str, fallbacks: tuple[str, ...]) -> list[tuple[str, AESGCM]]:
    ciphers = []
    for secret in (secret_key, *fallbacks):
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(
            secret.encode()
        )
        ciphers.append((hashlib.sha256(key).hexdigest()[:8], AESGCM(key)))
    return ciphers


class SealedCharField(models.CharField):
    """A text column whose value is stored sealed and read back plain."""

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> str | None:
        return value if value is None else unseal(value)

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        if value is None or value == "" or is_sealed(value):
            return value
        return seal(value)


class SealedSecretsField(models.JSONField):
    """A JSON list of `{"secret": …, …}` entries whose secrets are stored sealed."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        entries = super().from_db_value(value, expression, connection)
        return [_with_secret(entry, unseal) for entry in entries or []]

    def get_prep_value(self, value: Any) -> Any:
        sealed = [
            _with_secret(entry, lambda s: s if is_sealed(s) else seal(s)) for entry in value or []
        ]
        return super().get_prep_value(sealed)


def _with_secret(entry: dict[str, Any], change: Any) -> dict[str, Any]:
    return {**entry, "secret": change(entry["secret"])}
