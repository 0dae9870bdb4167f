"""Every list endpoint shares one cursor pagination: tampered cursors and bad page sizes are
400 problems, never a 500 from a bad value reaching the query."""

import base64

import pytest

LISTS = [
    "/v1/projects",
    "/v1/jobs",
    "/v1/notifications",
    "/v1/webhook-endpoints",
    "/v1/deliveries",
]


def _cursor(raw: str) -> str:
    return base64.b64encode(raw.encode()).decode()


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("position", ["p=not-a-date", "p=2026-13-45", "p=2026-01-01T25:00:00"])
def test_a_cursor_with_a_forged_position_is_400(alice, path, position):
    response = alice.client().get(path, {"cursor": _cursor(position)})

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["errors"] == {"cursor": ["Invalid cursor."]}


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("limit", ["false", "-1", "0", "101", "1.5", "ten", ""])
def test_a_page_size_outside_1_to_100_is_400(alice, path, limit):
    response = alice.client().get(path, {"limit": limit})

    assert response.status_code == 400
    assert "limit" in response.json()["errors"]


def test_a_valid_page_size_and_cursor_page_through(alice):
    client = alice.client()
    for index in range(3):
        client.post(
            "/v1/projects", {"name": f"p{index}"}, format="json", HTTP_IDEMPOTENCY_KEY=f"k{index}"
        )

    first = client.get("/v1/projects", {"limit": "2"}).json()
    second = client.get(first["next"]).json()

    assert len(first["results"]) == 2
    assert len(second["results"]) == 1
    assert second["next"] is None


def test_the_schema_bounds_the_page_size(client, db):
    schema = client.get("/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    parameters = schema["paths"]["/v1/projects"]["get"]["parameters"]
    limit = next(parameter for parameter in parameters if parameter["name"] == "limit")

    assert limit["schema"]["minimum"] == 1
    assert limit["schema"]["maximum"] == 100
