"""The Idempotency-Key header grammar (a pure function)."""

import pytest

from tenancy.api.idempotency_keys import (
    InvalidIdempotencyKey,
    idempotency_key_parse,
    request_fingerprint,
)


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("abc", "abc"),
        ('"abc"', "abc"),
        ('  "abc"  ', "abc"),
        (r'"a\"b"', 'a"b'),
        (r'"a\\b"', "a\\b"),
        ("8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324"),
        ("k" * 255, "k" * 255),
        ('"' + "k" * 255 + '"', "k" * 255),
    ],
)
def test_accepted_forms(raw, key):
    assert idempotency_key_parse(raw) == key


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (None, "required"),
        ("", "empty"),
        ('""', "empty"),
        ("k" * 256, "at most 255"),
        ('"' + "k" * 256 + '"', "at most 255"),
        ('"abc', "closing quote"),
        ('"a"b"', "after its quote"),
        (r'"a\nb"', "invalid escape"),
        ("a\x00b", "printable"),
        ("clé", "printable"),
    ],
)
def test_rejected_forms(raw, reason):
    with pytest.raises(InvalidIdempotencyKey, match=reason):
        idempotency_key_parse(raw)


def test_fingerprint_ignores_key_order_and_whitespace_but_not_values():
    first = request_fingerprint(method="post", path="/v1/projects", body={"a": 1, "b": [2]})
    same = request_fingerprint(method="POST", path="/v1/projects", body={"b": [2], "a": 1})
    other_body = request_fingerprint(method="POST", path="/v1/projects", body={"a": 2, "b": [2]})
    other_path = request_fingerprint(method="POST", path="/v1/other", body={"a": 1, "b": [2]})

    assert first == same
    assert len({first, other_body, other_path}) == 3
