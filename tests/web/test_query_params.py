"""A query parameter that takes one value is a 400 naming it when repeated, on every list
endpoint; numbers and ids in the query read ASCII digits only."""

import uuid

import pytest

from tests.delivery.factories import make_notification
from tests.web.write_endpoints import assert_problem

# An id no row has, fixed: every pytest-xdist worker must collect the same test ids.
UNKNOWN_ID = "2b9f6c1e-5d7a-4e8b-9c3f-0a1d2e3f4a5b"
LISTS = (
    "/v1/projects",
    "/v1/jobs",
    "/v1/notifications",
    "/v1/deliveries",
    "/v1/webhook-endpoints",
    "/v1/notifications/{notification}/deliveries",
)
FILTERS = {
    "/v1/jobs": ("status", "dead_lettered"),
    "/v1/notifications": ("state", "scheduled"),
    "/v1/deliveries": ("notification_id", UNKNOWN_ID),
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


@pytest.mark.parametrize("value", ["", "x", "%D9%A1" * 32, UNKNOWN_ID + "0"])
def test_notification_id_must_be_one_ascii_uuid(alice, value):
    response = _get(alice, "/v1/deliveries", f"notification_id={value}")

    assert response.status_code == 400
    assert assert_problem(response)["errors"] == {"notification_id": ["Must be a UUID."]}


@pytest.mark.parametrize(("path", "name"), [("/v1/jobs", "status"), ("/v1/notifications", "state")])
def test_an_empty_filter_is_a_400_too(alice, path, name):
    response = _get(alice, path, f"{name}=")

    assert response.status_code == 400
    assert name in assert_problem(response)["errors"]


# Every list route, members, tokens and invitations included.
ALL_LISTS = (*LISTS, "/v1/members", "/v1/tokens", "/v1/invitations")
UNKNOWN = "Unknown query parameter"


@pytest.fixture
def all_lists(alice, lists):
    return [*lists, "/v1/members", "/v1/tokens", "/v1/invitations"]


@pytest.mark.parametrize("query", ["project_id=1", "webhook_endpoint=x", "Limit=5", "status[]=a"])
def test_an_unknown_query_parameter_is_a_400_naming_it_on_every_list(alice, all_lists, query):
    name = query.split("=")[0]
    for path in all_lists:
        response = _get(alice, path, f"{query}&limit=5")

        assert response.status_code == 400, (path, response.content)
        problem = assert_problem(response)
        assert list(problem["errors"]) == [name], path
        assert problem["errors"][name][0].startswith(UNKNOWN)
        assert name in problem["detail"]


def test_the_reported_filters_no_list_takes_are_refused(alice):
    make_notification(tenant=alice.tenant, next_fire_at=None)
    jobs = _get(alice, "/v1/jobs", f"project_id={uuid.uuid4()}")
    notifications = _get(alice, "/v1/notifications", f"webhook_endpoint={uuid.uuid4()}")

    assert (jobs.status_code, notifications.status_code) == (400, 400)
    assert "project_id" in jobs.json()["errors"]
    assert "webhook_endpoint" in notifications.json()["errors"]


def test_format_is_taken_as_drf_takes_it(alice, all_lists):
    for path in all_lists:
        assert _get(alice, path, "format=json").status_code == 200, path


def test_the_schema_documents_exactly_what_each_list_takes(alice, client, all_lists):
    schema = client.get("/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    templates = dict(zip(ALL_LISTS, all_lists, strict=True))
    for template, operations in schema["paths"].items():
        listed = template.replace("{id}", "{notification}")
        if "get" not in operations or listed not in templates:
            continue
        documented = {p["name"] for p in operations["get"]["parameters"] if p["in"] == "query"}
        assert {"cursor", "limit"} <= documented, template
        for name in documented:
            response = _get(alice, templates[listed], f"{name}=x")
            errors = response.json().get("errors", {}) if response.status_code == 400 else {}
            assert not str(errors.get(name, "")).count(UNKNOWN), (template, name)
    assert {t.replace("{notification}", "{id}") for t in ALL_LISTS} <= set(schema["paths"])
