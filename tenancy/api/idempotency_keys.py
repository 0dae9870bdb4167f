"""The Idempotency-Key header's grammar and the fingerprint of a request (pure functions)."""

import hashlib
import json
from typing import Any

from web.errors import InvalidInput

MAX_KEY_LENGTH = 255


class InvalidIdempotencyKey(InvalidInput):
    """The Idempotency-Key header is missing or not an acceptable key; the message says why."""

    def __init__(self, message: str) -> None:
        super().__init__(
            {"Idempotency-Key": [message]},
            message=message,
            kind="idempotency-key",
        )


def idempotency_key_parse(raw: str | None) -> str:
    """The key carried by an Idempotency-Key header value.

    Accepts the draft's structured-field string (`"abc"`, with `\\"` and `\\\\` escapes) and
    the bare form (`abc`) as the same key. Keys are 1-255 printable ASCII characters.
    Raises InvalidIdempotencyKey otherwise.
    """
    if raw is None:
        raise InvalidIdempotencyKey("The Idempotency-Key header is required.")
    value = raw.strip(" \t")
    if value.startswith('"'):
        value = _sf_string_unquote(value)
    if not value:
        raise InvalidIdempotencyKey("The Idempotency-Key header must not be empty.")
    if len(value) > MAX_KEY_LENGTH:
        raise InvalidIdempotencyKey(
            f"The Idempotency-Key must be at most {MAX_KEY_LENGTH} characters."
        )
    if any(not " " <= char <= "~" for char in value):
        raise InvalidIdempotencyKey("The Idempotency-Key must be printable ASCII.")
    return value


def _sf_string_unquote(value: str) -> str:
    # RFC 8941 §3.3.3: only \" and \\ are escapes, and the string ends at the closing quote.
    chars: list[str] = []
    index = 1
    while index < len(value):
        char = value[index]
        if char == "\\":
            if index + 1 >= len(value) or value[index + 1] not in '"\\':
                raise InvalidIdempotencyKey("The Idempotency-Key has an invalid escape.")
            chars.append(value[index + 1])
            index += 2
        elif char == '"':
            if index != len(value) - 1:
                raise InvalidIdempotencyKey("The Idempotency-Key has text after its quote.")
            return "".join(chars)
        else:
            chars.append(char)
            index += 1
    raise InvalidIdempotencyKey("The Idempotency-Key is missing its closing quote.")


def request_fingerprint(*, method: str, path: str, body: Any) -> str:
    """sha256 over the method, the path and the canonical JSON of the validated body
    (`default=str` spells UUIDs and datetimes of validated data as their JSON forms; a lone
    surrogate, refused elsewhere, still fingerprints rather than failing)."""
    canonical = json.dumps(
        body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    digest = hashlib.sha256(f"{method.upper()}\n{path}\n{canonical}".encode(errors="surrogatepass"))
    return digest.hexdigest()
