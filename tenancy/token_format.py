"""The shape of an API token, as pure functions: `tkw_<random>_<checksum>`.

As GitHub's tokens do: a recognisable prefix (secret scanners find leaked ones), 40
base62 random characters (about 238 bits) and a fixed-width base62 CRC32 of the random part,
so a mistyped or made-up token is refused before any database read.

Tokens minted before this format (`tkw_<12 hex>_<urlsafe secret>`) carry no checksum; their
shape cannot be mistaken for the new one (their 17th character is `_`), so they keep the
database path they always had.
"""

import re
import secrets
import zlib

SCHEME = "tkw_"
RANDOM_LENGTH = 40
CHECKSUM_LENGTH = 6  # 62**6 > 2**32: every CRC32 fits
LOOKUP_LENGTH = len(SCHEME) + 12  # the stored, displayed and indexed prefix
BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

_CHECKSUMMED = re.compile(
    rf"{SCHEME}([0-9A-Za-z]{{{RANDOM_LENGTH}}})_([0-9A-Za-z]{{{CHECKSUM_LENGTH}}})"
)
_LEGACY = re.compile(rf"{SCHEME}[0-9a-f]{{12}}_[A-Za-z0-9_-]+")


def _base62(number: int, width: int) -> str:
    digits = []
    while number:
        number, digit = divmod(number, 62)
        digits.append(BASE62[digit])
    return "".join(reversed(digits)).rjust(width, BASE62[0])


def checksum(random_part: str) -> str:
    return _base62(zlib.crc32(random_part.encode("ascii")), CHECKSUM_LENGTH)


def mint() -> str:
    """A fresh token in the checksummed format."""
    random_part = "".join(secrets.choice(BASE62) for _ in range(RANDOM_LENGTH))
    return f"{SCHEME}{random_part}_{checksum(random_part)}"


def lookup_prefix(plaintext: str) -> str | None:
    """The stored prefix to look a presented token up by, or None when it cannot be one of
    ours: not our shape, or the checksummed shape with a checksum that does not match."""
    checksummed = _CHECKSUMMED.fullmatch(plaintext)
    if checksummed is not None:
        random_part, presented = checksummed.groups()
        if not secrets.compare_digest(checksum(random_part), presented):
            return None
        return plaintext[:LOOKUP_LENGTH]
    if _LEGACY.fullmatch(plaintext) is not None:
        return plaintext[:LOOKUP_LENGTH]
    return None
