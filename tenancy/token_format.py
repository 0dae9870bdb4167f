"""The shape of an API token, as pure functions: `tkw_<random>_<checksum>`.

Other bearer credentials take the same shape under a scheme of their own (a portal session's
`tkp_…`), so a scanner tells them apart and each is refused by the others' lookups.

As GitHub's tokens do: a recognisable prefix (secret scanners find leaked ones), 40
base62 random characters (about 238 bits) and a fixed-width base62 CRC32 of the random part,
so a mistyped or made-up token is refused before any database read.

Tokens minted before this format (`tkw_<12 hex>_<urlsafe secret>`) carry no checksum; their
shape cannot be mistaken for the new one (their 17th character is `_`), so they keep the
database path they always had.
"""

import hashlib
import re
import secrets
import zlib

SCHEME = "tkw_"
RANDOM_LENGTH = 40
CHECKSUM_LENGTH = 6  # 62**6 > 2**32: every CRC32 fits
LOOKUP_LENGTH = len(SCHEME) + 12  # the stored, displayed and indexed prefix
BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _checksummed(scheme: str) -> re.Pattern[str]:
    return re.compile(
        rf"{re.escape(scheme)}([0-9A-Za-z]{{{RANDOM_LENGTH}}})_([0-9A-Za-z]{{{CHECKSUM_LENGTH}}})"
    )


_CHECKSUMMED = {SCHEME: _checksummed(SCHEME)}
_LEGACY = re.compile(rf"{SCHEME}[0-9a-f]{{12}}_[A-Za-z0-9_-]+")


def _base62(number: int, width: int) -> str:
    digits = []
    while number:
        number, digit = divmod(number, 62)
        digits.append(BASE62[digit])
    return "".join(reversed(digits)).rjust(width, BASE62[0])


def checksum(random_part: str) -> str:
    return _base62(zlib.crc32(random_part.encode("ascii")), CHECKSUM_LENGTH)


def mint(scheme: str = SCHEME) -> str:
    """A fresh token in the checksummed format, under `scheme` (four characters)."""
    random_part = "".join(secrets.choice(BASE62) for _ in range(RANDOM_LENGTH))
    return f"{scheme}{random_part}_{checksum(random_part)}"


def lookup_prefix(plaintext: str, scheme: str = SCHEME) -> str | None:
    """The stored prefix to look a presented token up by, or None when it cannot be one of
    `scheme`'s: not its shape, or the checksummed shape with a checksum that does not match.
    Only API tokens (SCHEME) have a legacy shape."""
    pattern = _CHECKSUMMED.get(scheme) or _CHECKSUMMED.setdefault(scheme, _checksummed(scheme))
    checksummed = pattern.fullmatch(plaintext)
    if checksummed is not None:
        random_part, presented = checksummed.groups()
        if not secrets.compare_digest(checksum(random_part), presented):
            return None
        return plaintext[:LOOKUP_LENGTH]
    if scheme == SCHEME and _LEGACY.fullmatch(plaintext) is not None:
        return plaintext[:LOOKUP_LENGTH]
    return None


def digest(plaintext: str) -> str:
    """What is stored of a token: its SHA-256. Tokens carry about 238 random bits, so a fast
    hash is safe; it is never a password."""
    return hashlib.sha256(plaintext.encode()).hexdigest()
