"""Every write endpoint names the fields a body may not set: unknown ones and the
resource's read-only ones, in a 400 that changes nothing."""

import json

import pytest
from rest_framework import serializers

from tests.web.write_endpoints import WRITES, assert_problem, seed_targets, send, stored_state
from web.serializers import READ_ONLY_FIELD, UNKNOWN_FIELD, RejectsUndeclaredFields

pytestmark = pytest.mark.usefixtures("public_dns")

# A body each endpoint would accept, so the undeclared field is the only thing wrong.
VALID = {
    "/v1/projects": {"name": "Relaunch"},
    "/v1/notifications": {
        "channels": ["email"],
        "email_to": ["ops@example.com"],
        "subject": "Hi",
        "body": "B",
    },
    "/v1/notifications/{notification}": {"subject": "Changed"},
    "/v1/webhook-endpoints": {"url": "https://hooks.example.com/new"},
    "/v1/webhook-endpoints/{endpoint}": {"enabled": False},
    "/v1/members/{member}": {"role": "owner"},
    "/v1/tokens": {"name": "ci"},
}


@pytest.mark.parametrize("write", WRITES, ids=lambda write: write.name)
def test_unknown_and_read_only_fields_are_named_in_a_400_that_writes_nothing(alice, write):
    targets = seed_targets(alice)
    body = {**VALID.get(write.template, {}), "colour": "red", "tenant_id": "x"}
    body.update({name: "x" for name in write.read_only})
    before = stored_state(targets)

    response = send(alice, write.method, targets.path(write), json.dumps(body).encode())

    assert response.status_code == 400, response.content
    errors = assert_problem(response)["errors"]
    assert errors["colour"] == errors["tenant_id"] == [UNKNOWN_FIELD]
    for name in write.read_only:
        assert errors[name] == [READ_ONLY_FIELD], name
    assert set(errors) == {"colour", "tenant_id", *write.read_only}
    assert stored_state(targets) == before


@pytest.mark.parametrize("write", WRITES, ids=lambda write: write.name)
def test_the_same_body_without_them_is_accepted(alice, write):
    targets = seed_targets(alice)

    response = send(
        alice, write.method, targets.path(write), json.dumps(VALID.get(write.template, {})).encode()
    )

    assert response.status_code < 300, response.content


def test_actions_take_an_empty_body_or_none(alice):
    targets = seed_targets(alice)

    response = send(alice, "POST", f"/v1/webhook-endpoints/{targets.endpoint}/rotate-secret", b"")

    assert response.status_code == 200


class Shape(RejectsUndeclaredFields, serializers.Serializer):
    representation = None
    name = serializers.CharField(max_length=3)
    shown = serializers.CharField(read_only=True)


def test_undeclared_fields_join_the_fields_own_errors():
    shape = Shape(data={"name": "too long", "shown": "x", "extra": 1})

    assert not shape.is_valid()
    assert set(shape.errors) == {"name", "shown", "extra"}
    assert shape.errors["shown"] == [READ_ONLY_FIELD]
    assert shape.errors["extra"] == [UNKNOWN_FIELD]


def test_a_body_that_is_no_object_is_refused_as_such():
    shape = Shape(data=["name"])

    assert not shape.is_valid()
    assert set(shape.errors) == {"non_field_errors"}
