"""The one JSON parser of the API (DEFAULT_PARSER_CLASSES): what DRF's parser does, plus
the limits below checked on the raw text, so no body can reach a view that a field,
an error message or the database cannot hold.

- UTF-8 only (RFC 8259 §8.1), decoded strictly;
- nesting at most MAX_JSON_DEPTH levels: checked before parsing, because the parser
  recurses and a 2 KB body of 950 brackets would exhaust the stack;
- no NUL and no unpaired surrogate, in keys as in values: both can only come from `\\u`
  escapes (strict UTF-8 decoding and strict JSON refuse them raw), so a body without `\\u`
  skips the check;
- numbers are finite: `1e400` would parse as infinity, which no answer can render.
"""

import codecs
import math
import re
from collections.abc import Mapping
from typing import IO, Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser, get_encoding
from rest_framework.utils import json

MAX_JSON_DEPTH = 32

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
# bytes.translate arguments keeping only brackets, both kinds spelled as "[" and "]".
_ONE_BRACKET_KIND = bytes.maketrans(b"{}", b"[]")
_NOT_A_BRACKET = bytes(set(range(256)) - set(b"[]{}"))
_ESCAPED_BACKSLASH = "\\\\"
# Once every escaped backslash is blanked out, each backslash left starts an escape.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD]([89a-fA-F])[0-9a-fA-F]{2}")


class StrictJSONParser(JSONParser):
    def parse(
        self,
        stream: IO[bytes],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        text = _decode(stream.read(), get_encoding(dict(parser_context or {})))
        if not nested_at_most(text, MAX_JSON_DEPTH):
            raise ParseError(f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels.")
        try:
            data = json.loads(text, parse_float=_finite_float)
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        if "\\u" in text:
            _check_escapes(text)
        return data


def nested_at_most(text: str, limit: int) -> bool:
    """False when the JSON text nests arrays and objects deeper than `limit` levels.

    Exact for well-formed JSON; malformed text may also answer False (it is refused
    either way). Runs in C: brackets inside strings are dropped, then each round deletes
    every innermost pair (`[]` once both kinds are one), so after `limit` rounds a pair is
    left only where the nesting went deeper.
    """
    if text.count("[") + text.count("{") <= limit:
        return True
    outside_strings = _STRING.sub("", text).encode()
    brackets = outside_strings.translate(_ONE_BRACKET_KIND, _NOT_A_BRACKET)
    for _ in range(limit):
        if not brackets:
            return True
        brackets = brackets.replace(b"[]", b"")
    return b"[]" not in brackets


def _decode(body: bytes, encoding: str) -> str:
    if codecs.lookup(encoding).name != "utf-8":
        raise ParseError("JSON must be encoded as UTF-8.")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise ParseError("JSON parse error - the body is not valid UTF-8.") from None


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError(f"number out of range: {literal[:32]}")
    return value


def _check_escapes(text: str) -> None:
    """Refuse `\\u0000` and `\\ud800`-`\\udfff` escapes that do not form a pair (the text
    is well-formed JSON: every backslash in it is inside a string)."""
    escapes = text.replace(_ESCAPED_BACKSLASH, "..")
    if "\\u0000" in escapes:
        raise ParseError("JSON parse error - strings and keys may not contain NUL (\\u0000).")
    if _has_unpaired_surrogate(escapes):
        raise ParseError(
            "JSON parse error - strings and keys may not contain an unpaired surrogate "
            "(\\ud800-\\udfff); send the character itself in UTF-8."
        )


def _has_unpaired_surrogate(escapes: str) -> bool:
    """True unless each high surrogate escape is followed at once by a low one, and each
    low one follows a high one."""
    pending = -1  # where the low half of the last high escape must start
    for match in _SURROGATE_ESCAPE.finditer(escapes):
        is_low = match.group(1) in "cdefCDEF"
        follows_high = match.start() == pending
        if (pending != -1 and not follows_high) or is_low != follows_high:
            return True
        pending = -1 if is_low else match.end()
    return pending != -1
