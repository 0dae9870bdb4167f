"""Bad bodies for POST /v1/projects: 4xx problems with field errors, never a 5xx."""

import json

import pytest

from projects.models import Project


def post_raw(actor, data, content_type="application/json"):
    return actor.client().post(
        "/v1/projects", data, content_type=content_type, headers={"Idempotency-Key": "v"}
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": 42}, "name"),
        ({"name": ["a"]}, "name"),
        ({"name": None}, "name"),
        ({"name": True}, "name"),
        ({"name": "x" * 201}, "name"),
        ({"name": "P", "invite": "a@example.com"}, "invite"),
        ({"name": "P", "invite": ["not-an-email"]}, "invite"),
        ({"name": "P", "invite": [42]}, "invite"),
        ({"name": "P", "invite": [f"u{i}@example.com" for i in range(51)]}, "invite"),
        ({"name": "P", "tenant_id": "x"}, "tenant_id"),
        ([], "non_field_errors"),
        ("just a string", "non_field_errors"),
    ],
)
def test_field_errors_are_400_problems(alice, body, field):
    response = post_raw(alice, json.dumps(body))

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == 400
    assert field in problem["errors"]
    assert not Project.objects.exists()


@pytest.mark.parametrize(
    "raw",
    ['{"name": ', "{'name': 'P'}", '{"name": NaN}', "\x00", json.dumps({"name": "a\x00b"})],
)
def test_malformed_json_is_400(alice, raw):
    response = post_raw(alice, raw)

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"


def test_a_form_body_is_415(alice):
    response = post_raw(alice, "name=P", content_type="application/x-www-form-urlencoded")

    assert response.status_code == 415
    assert response["Content-Type"] == "application/problem+json"


def test_a_null_byte_in_the_key_is_400(alice):
    response = alice.client().post(
        "/v1/projects", {"name": "P"}, format="json", headers={"Idempotency-Key": "a\x00b"}
    )

    assert response.status_code == 400
