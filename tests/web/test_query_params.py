"""A query parameter that takes one value is a 400 naming it when repeated, on every list
endpoint; numbers and ids in the query read ASCII digits only."""

import uuid

import pytest

from tests.notifications.factories import make_notification
from tests.web.write_endpoints import assert_problem

LISTS = (
    "/v1/projects",
    "/v1/jobs",
    "/v1/notifications",
    "/v1/deliveries",
    "/v1/webhook-endpoints",
    "/v1/notifications/{notification}/deliveries",
)
FILTERS = {
    "/v1/jobs": ("status", "failed"),
    "/v1/notifications": ("state", "scheduled"),
    "/v1/deliveries": ("notification_id", str(uuid.uuid4())),
}


@pytest.fixture
def lists(alice):
    notification = make_notification(tenant=alice.tenant, next_fire_at=None)
    return [template.format(notification=notification.id) for template in LISTS]


def _get(actor, path, query):
    return actor.client().get(f"{path}?{query}")


def _paths_and_params(lists):
    for template, path in zip(LISTS, lists, strict=True):
        yield path, "limit", "5"
        yield path, "cursor", "cD0yMDI2LTAxLTAxVDAwJTNBMDAlM0EwMFo="
        if template in FILTERS:
            yield path, *FILTERS[template]


def test_each_parameter_once_is_fine_and_twice_is_a_400_naming_it(alice, lists):
    for path, name, value in _paths_and_params(lists):
        once = _get(alice, path, f"{name}={value}")
        twice = _get(alice, path, f"{name}={value}&{name}={value}")

        assert once.status_code == 200, (path, name, once.content)
        assert twice.status_code == 400, (path, name)
        assert assert_problem(twice)["errors"] == {name: ["Give this query parameter once."]}


@pytest.mark.parametrize(
    "query",
    ["limit=%D9%A1%D9%A2", "limit=+5", "limit=1_0", "limit=" + "9" * 5000, "limit=", "limit=0"],
)
def test_limit_is_one_to_three_ascii_digits(alice, query):
    response = _get(alice, "/v1/notifications", query)

    assert response.status_code == 400
    assert "limit" in assert_problem(response)["errors"]


@pytest.mark.parametrize("value", ["", "x", "%D9%A1" * 32, str(uuid.uuid4()) + "0"])
def test_notification_id_must_be_one_ascii_uuid(alice, value):
    response = _get(alice, "/v1/deliveries", f"notification_id={value}")

    assert response.status_code == 400
    assert assert_problem(response)["errors"] == {"notification_id": ["Must be a UUID."]}


@pytest.mark.parametrize(("path", "name"), [("/v1/jobs", "status"), ("/v1/notifications", "state")])
def test_an_empty_filter_is_a_400_too(alice, path, name):
    response = _get(alice, path, f"{name}=")

    assert response.status_code == 400
    assert name in assert_problem(response)["errors"]
