"""Every write endpoint names the fields a body may not set: unknown ones and the
resource's read-only ones, in a 400 that changes nothing."""

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework import serializers

from onboarding.signins import signin_link_record
from onboarding.signups import signup_request_record
from tenancy.invitations import invitation_issue
from tenancy.models import Tenant
from tests.conftest import link_token
from tests.web.write_endpoints import WRITES, assert_problem, seed_targets, send, stored_state
from web.serializers import READ_ONLY_FIELD, UNKNOWN_FIELD, RejectsUndeclaredFields

pytestmark = pytest.mark.usefixtures("public_dns", "signup_on")

# A body each endpoint would accept, so the undeclared field is the only thing wrong.
VALID: dict[str, dict[str, Any]] = {
    "/v1/projects": {"name": "Relaunch"},
    "/v1/projects/{project}": {"name": "Renamed"},
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
    "/v1/signup": {"email": "new@example.com", "tenant_name": "New", "captcha_token": "t"},
    "/v1/invitations": {"email": "new@example.com", "role": "member"},
    "/v1/me": {"name": "Alice"},
    "/v1/tenant": {"name": "Renamed"},
    "/v1/signin": {"email": "alice@example.com", "captcha_token": "t"},
    "/v1/recipients/{recipient}": {"email": "person@example.com"},
    "/v1/recipients/{recipient}/preferences": {"channels": {"email": False}},
    "/v1/event-types": {"name": "made.here"},
    "/v1/applications": {"uid": "made-here", "name": "Made here"},
    "/v1/applications/{application}": {"name": "Renamed"},
    "/v1/messages": {"event_type": "fuzzed.type", "payload": {}},
}


def _verification() -> dict[str, Any]:
    reference = signup_request_record(
        email="new@example.com", tenant_name="New", address="", now=timezone.now()
    )
    assert reference is not None, "signup is on and the address is new"
    return {"token": link_token(reference, "new@example.com")}


def _invitation_of_alice() -> dict[str, Any]:
    """Accepted with Alice's token, so it must be hers (the fixture's address)."""
    inviter = Tenant.objects.create(name="Inviter")
    issued = invitation_issue(
        tenant=inviter,
        email="alice@example.com",
        role="member",
        invited_by=None,
        now=timezone.now(),
    )
    return {"token": link_token(issued.link, "alice@example.com")}


def _signin_of_alice() -> dict[str, Any]:
    issued = signin_link_record(email="alice@example.com", address="", now=timezone.now())
    assert issued is not None, "Alice is an active user"
    return {"token": link_token(issued.reference, "alice@example.com")}


# Their valid bodies carry a token made for the request.
FRESH = {
    "/v1/signup/verify": _verification,
    "/v1/invitations/accept": _invitation_of_alice,
    "/v1/invitations/preview": _invitation_of_alice,
    "/v1/signin/verify": _signin_of_alice,
    "/v1/webhook-endpoints/{endpoint}/recover": lambda: {
        "since": (timezone.now() - timedelta(days=1)).isoformat()
    },
}


def valid_body(template: str) -> dict[str, Any]:
    return FRESH[template]() if template in FRESH else VALID.get(template, {})


@pytest.mark.parametrize("write", WRITES, ids=lambda write: write.name)
def test_unknown_and_read_only_fields_are_named_in_a_400_that_writes_nothing(alice, write):
    targets = seed_targets(alice)
    # Naming another tenant is the unknown field that matters, where it is not a field.
    other = "tenant_id" if "tenant_id" not in write.writable else "tenant"
    body = {**valid_body(write.template), "colour": "red", other: "x"}
    body.update({name: "x" for name in write.read_only})
    before = stored_state(targets)

    response = send(alice, write.method, targets.path(write), json.dumps(body).encode())

    assert response.status_code == 400, response.content
    errors = assert_problem(response)["errors"]
    assert errors["colour"] == errors[other] == [UNKNOWN_FIELD]
    for name in write.read_only:
        assert errors[name] == [READ_ONLY_FIELD], name
    assert set(errors) == {"colour", other, *write.read_only}
    assert stored_state(targets) == before


@pytest.mark.parametrize("write", WRITES, ids=lambda write: write.name)
def test_the_same_body_without_them_is_accepted(alice, write):
    targets = seed_targets(alice)

    response = send(
        alice, write.method, targets.path(write), json.dumps(valid_body(write.template)).encode()
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
