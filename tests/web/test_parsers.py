"""The API's JSON parser: depth, NUL, surrogates, numbers and encodings refused with a 400
problem on every write endpoint, and its text checks agree with the parsed document."""

import io
import json
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.exceptions import ParseError

from tests.conftest import Actor, make_owner
from tests.support.module_rows import rows_for_the_module
from tests.web.write_endpoints import (
    WRITES,
    Targets,
    assert_problem,
    seed_targets,
    send,
    stored_state,
)
from web.parsers import MAX_JSON_DEPTH, StrictJSONParser, nested_at_most

pytestmark = pytest.mark.usefixtures("public_dns", "signup_on")


def parse(raw: bytes | str, encoding: str = "utf-8"):
    body = raw.encode() if isinstance(raw, str) else raw
    return StrictJSONParser().parse(io.BytesIO(body), parser_context={"encoding": encoding})


def nested(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


@pytest.mark.parametrize("depth", [0, 1, 31, 32])
def test_nesting_up_to_32_levels_parses(depth):
    assert parse(nested(depth)) is not None
    assert parse('{"a":' * depth + "1" + "}" * depth) is not None


@pytest.mark.parametrize("depth", [33, 40, 950, 100_000])
def test_nesting_deeper_than_32_levels_is_refused_before_parsing(depth):
    with pytest.raises(ParseError, match="nested deeper than 32 levels"):
        parse(nested(depth))
    with pytest.raises(ParseError, match="nested deeper than 32 levels"):
        parse('{"a":[' * (depth // 2 + 1) + "1" + "]}" * (depth // 2 + 1))


def test_brackets_inside_strings_do_not_count_and_wide_documents_pass():
    assert parse(json.dumps({"s": "[" * 500, "t": '\\"{' * 100}))
    assert parse("[" + ",".join(["[[]]"] * 10_000) + "]")


@pytest.mark.parametrize(
    "raw",
    [
        r'{"name": "x", "\ud800": 1}',
        r'{"name": "\udfff"}',
        r'["\ud800\ud800\udc00"]',
        r'["\ud83d\\ude00"]',
        r'["\\\ud800"]',
        r'{"\u0000": 1}',
        r'["a\u0000b"]',
    ],
)
def test_nul_and_unpaired_surrogates_are_refused_in_keys_and_values(raw):
    with pytest.raises(ParseError, match=r"NUL|unpaired surrogate"):
        parse(raw)


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        (r'["\ud83d\ude00"]', ["\U0001f600"]),
        (r'["\\ud800"]', ["\\ud800"]),
        (r'["\\u0000"]', ["\\u0000"]),
        (r'["\u00e9\u20ac"]', ["é€"]),
    ],
)
def test_pairs_and_escaped_backslashes_are_plain_text(raw, value):
    assert parse(raw) == value


@pytest.mark.parametrize(
    "raw", ["[1e400]", "[-1e400]", "[NaN]", "[Infinity]", "[" + "9" * 5000 + "]"]
)
def test_numbers_must_be_finite_and_of_sane_length(raw):
    with pytest.raises(ParseError):
        parse(raw)


def test_only_utf8_is_accepted():
    with pytest.raises(ParseError, match="UTF-8"):
        parse('{"name": "x"}'.encode("utf-16"), encoding="utf-16")
    with pytest.raises(ParseError, match="not valid UTF-8"):
        parse(b'{"name": "\xff"}')
    with pytest.raises(ParseError, match="not valid UTF-8"):
        parse(b'["\xed\xa0\x80"]')  # a surrogate encoded as UTF-8 bytes


# What Python's json makes of any document: the parser refuses exactly those whose strings
# hold NUL or a lone surrogate, or whose nesting is too deep.
_ALL_TEXT = st.text(
    st.characters(exclude_categories=()) | st.sampled_from("\x00\ud800\udbff\udc00\U0001f600\\"),
    max_size=6,
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _ALL_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_ALL_TEXT, inner, max_size=3),
    max_leaves=60,
)


def _depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def _strings(value):
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def _clean(text: str) -> bool:
    return "\x00" not in text and not any(0xD800 <= ord(char) <= 0xDFFF for char in text)


@settings(max_examples=300, derandomize=True, database=None)
@given(value=_JSON, wrap=st.integers(0, 36), ensure_ascii=st.booleans())
def test_the_text_checks_agree_with_the_parsed_document(value, wrap, ensure_ascii):
    document = value
    for _ in range(wrap):
        document = [document]
    try:
        raw = json.dumps(document, ensure_ascii=ensure_ascii).encode("utf-8")
    except UnicodeEncodeError:
        raw = json.dumps(document, ensure_ascii=True).encode("utf-8")
    acceptable = _depth(document) <= MAX_JSON_DEPTH and all(map(_clean, _strings(document)))

    try:
        parsed = parse(raw)
    except ParseError:
        assert not acceptable
    else:
        assert acceptable
        assert parsed == document
    assert nested_at_most(raw.decode(), MAX_JSON_DEPTH) == (_depth(document) <= MAX_JSON_DEPTH)


# Through the API: the same 400 problem on every JSON write, and nothing written.

_REFUSED = {
    "deep": '{"name": ' + nested(950) + "}",
    "33 levels": '{"subject": ' + nested(32) + "}",
    "surrogate key": r'{"name": "x", "\ud800": 1}',
    "surrogate value": r'{"url": "https://hooks.example.com/\udc00"}',
    "nul key": r'{"\u0000": 1}',
    "infinite": '{"enabled": 1e999}',
}


@pytest.fixture(scope="module")
def aimed(django_db_setup, django_db_blocker) -> Iterator[tuple[Actor, Targets]]:
    """An owner and the rows the writes aim at, made once for the ~160 refused writes: they
    live in a transaction around the module, and each test runs in a savepoint of its own
    (pytest-django's `db`). An address of its own: other tests here make the usual Alice."""
    with rows_for_the_module(django_db_blocker):
        owner = make_owner("Tenant A", "alice@parsers.example.com")
        yield owner, seed_targets(owner)


@pytest.mark.django_db
@pytest.mark.parametrize("write", WRITES, ids=lambda write: write.name)
@pytest.mark.parametrize("case", sorted(_REFUSED))
def test_every_write_answers_a_400_problem_and_writes_nothing(aimed, write, case):
    alice, targets = aimed
    before = stored_state(targets)

    response = send(alice, write.method, targets.path(write), _REFUSED[case].encode())

    assert response.status_code == 400, response.content
    problem = assert_problem(response)
    assert problem["detail"].startswith("JSON parse error")
    assert stored_state(targets) == before


@settings(
    max_examples=20,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(depth=st.integers(33, 2000))
def test_any_depth_beyond_32_is_a_400_on_project_create(alice, depth):
    response = send(alice, "POST", "/v1/projects", nested(depth).encode())

    assert response.status_code == 400
    assert "nested deeper than 32 levels" in assert_problem(response)["detail"]


@pytest.mark.parametrize(
    "raw",
    [r'["\ud800x\ud800\udc00"]', r'["\ud800", "\udc00"]', r'["\ud800x"]', r'["x\ud800"]'],
)
def test_a_high_surrogate_must_be_followed_at_once_by_a_low_one(raw):
    with pytest.raises(ParseError, match="unpaired surrogate"):
        parse(raw)
