"""Property-based fuzz of every write endpoint (hypothesis), beside the schema fuzz of
test_api_fuzz.py: bodies no schema describes — deep nesting, every Unicode category
(other scripts' digits, surrogates, NUL, spaces), surrogates in keys, unknown and
read-only keys, wrong types, huge numbers — sent as raw bytes.

Held for each: no 5xx; every 4xx is an RFC 9457 problem; a 4xx writes nothing; a body
with a field the endpoint may not set is a 400.
"""

import json

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.support.addresses import address
from tests.web.write_endpoints import WRITES, assert_problem, seed_targets, send, stored_state
from web.headers import SINGLE_VALUE_HEADERS

# Signup is fuzzed like every write: on (it is off by default).
pytestmark = pytest.mark.usefixtures("public_dns", "signup_on")


EXAMPLES_PER_ENDPOINT = 40

FUZZ = settings(
    max_examples=EXAMPLES_PER_ENDPOINT,
    derandomize=True,
    database=None,
    deadline=None,
    # No shrinking: a failure is reported as found, so a failing run stays short too.
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

_AWKWARD = ["\x00", "\ud800", "\udfff", "\u0661", "\u0967", "²", "①", "\u3000", "\U0001f600"]
_HAZARDOUS_KEYS = ["\ud800", "x\udc00", "\udbff\udfff", "\x00", "\u0661", "name\u3000"]
# Whole values that once got through, or that a field must refuse.
_KNOWN_BAD = [
    "\u0661\u0662",
    "localtime",
    "posix/Europe/Berlin",
    "Factory",
    "https://hooks.example.com:0/",
    "FREQ=DAILY;INTERVAL=\u00b2",
    "\u0661" * 8 + "-1111-1111-1111-111111111111",
    # The product's own event types, which a tenant may not publish (403).
    "project.active",
    "message.attempt.exhausted",
]
_TEXT = st.text(
    st.characters(categories=("Nd", "No", "Cs", "Cc", "Zs", "Lo", "So", "Mn"))
    | st.characters()
    | st.sampled_from(_AWKWARD),
    max_size=12,
)


class Raw(str):
    """A JSON literal written into the body as is (numbers Python would not write)."""


_NUMBERS = st.one_of(
    st.integers(),
    st.integers(min_value=10**30, max_value=10**60),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["1e400", "-1e999", "9" * 4400, "0.1e-400", "-0", "1E+2"]).map(Raw),
)
_VALUES = st.recursive(
    st.none() | st.booleans() | _NUMBERS | _TEXT | st.sampled_from(_KNOWN_BAD),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=12,
)


def _deep(depth: int, kind: str) -> str:
    return ("[" if kind == "[" else '{"a":') * depth + "1" + ("]" if kind == "[" else "}") * depth


def _encode(value) -> str:
    """JSON text with every string's lone surrogates and NUL as `\\u` escapes."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{_encode(k)}:{_encode(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(map(_encode, value)) + "]"
    return json.dumps(value, ensure_ascii=False) if _encodable(value) else json.dumps(value)


def _encodable(value) -> bool:
    return not isinstance(value, str) or not any(0xD800 <= ord(c) <= 0xDFFF for c in value)


@st.composite
def bodies(draw, write) -> bytes:
    """A JSON object mixing the endpoint's fields, its read-only ones and unknown keys with
    any values; or now and then a deep document or another top-level value."""
    shape = draw(st.sampled_from(["object"] * 6 + ["deep", "scalar", "array"]))
    if shape == "deep":
        depth = draw(st.sampled_from([33, 950, 3000]) | st.integers(30, 1200))
        text = _deep(depth, draw(st.sampled_from("[{")))
        return (
            '{"' + draw(st.sampled_from(sorted(write.writable) or ["x"])) + '":' + text + "}"
        ).encode()
    if shape != "object":
        return _encode(draw(_VALUES if shape == "scalar" else st.lists(_VALUES))).encode()
    keys = st.one_of(
        st.sampled_from(sorted(write.writable | write.read_only) or ["x"]),
        st.sampled_from(_HAZARDOUS_KEYS),
        _TEXT,
    )
    body = draw(st.dictionaries(keys, _VALUES, max_size=5))
    return _encode(body).encode("utf-8")


def _undeclared(raw: bytes, write) -> set[str]:
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return set()
    return set(body) - write.writable if isinstance(body, dict) else set()


@pytest.mark.parametrize("write", WRITES, ids=lambda write: write.name)
def test_no_body_breaks_a_write(alice, write):
    targets = seed_targets(alice)
    path = targets.path(write)

    @FUZZ
    @given(raw=bodies(write))
    def check(raw: bytes) -> None:
        before = stored_state(targets)

        response = send(alice, write.method, path, raw)

        assert response.status_code < 500, (raw, response.content)
        if response.status_code >= 400:
            assert_problem(response)
            assert stored_state(targets) == before, raw
        if _undeclared(raw, write):
            assert response.status_code == 400, (raw, response.content)

    check()


# Input the store and the headers cannot hold (README: API overview): each is a 400 on any write
# that takes it, whatever else the body holds, and writes nothing.
_ADDRESS_FIELDS = {"email": str, "invite": list, "email_to": list}
_OVERLONG_ADDRESS = st.integers(255, 320).map(address)
_BROKEN_SUBJECT = st.tuples(_TEXT, st.sampled_from(["\r", "\n", "\r\n"]), _TEXT).map("".join)
_FOLDED = st.sampled_from(SINGLE_VALUE_HEADERS).flatmap(
    lambda name: st.tuples(st.just(name), st.sampled_from(["a,b", '"a","b"', "0/0,0/0"]))
)


@st.composite
def unholdable(draw, write) -> tuple[dict, dict[str, str]]:
    """A body with one value the store cannot hold, or a repeated single-value header."""
    fields = [name for name in sorted(write.writable) if name in _ADDRESS_FIELDS]
    fields += ["subject"] if "subject" in write.writable else []
    body = {"name": "P"} if "name" in write.writable else {}
    if not fields or draw(st.booleans()):
        name, value = draw(_FOLDED)
        return body, {name: value}
    field = draw(st.sampled_from(fields))
    if field == "subject":
        return {**body, "subject": draw(_BROKEN_SUBJECT)}, {}
    overlong = draw(_OVERLONG_ADDRESS)
    return {**body, field: [overlong] if _ADDRESS_FIELDS[field] is list else overlong}, {}


@pytest.mark.parametrize("write", WRITES, ids=lambda write: write.name)
def test_what_the_store_and_headers_cannot_hold_is_a_400(alice, write):
    targets = seed_targets(alice)
    path = targets.path(write)

    @settings(FUZZ, max_examples=15)
    @given(shape=unholdable(write))
    def check(shape: tuple[dict, dict[str, str]]) -> None:
        body, headers = shape
        before = stored_state(targets)

        response = send(alice, write.method, path, _encode(body).encode(), **headers)

        assert response.status_code == 400, (body, headers, response.content)
        assert_problem(response)
        assert stored_state(targets) == before

    check()
