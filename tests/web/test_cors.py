"""CORS for a browser front end on another origin (README: Signing in and sessions): preflights
answered before authentication, every answer to an allowed origin carrying its headers, nothing for
any other origin, and no credentials."""

import uuid

import pytest
from django.core.exceptions import ImproperlyConfigured
from rest_framework.test import APIClient

from config.environment import origins

FRONT_END = "http://localhost:3000"
ELSEWHERE = "https://evil.example.com"
ALLOWED_HEADERS = {
    "authorization",
    "content-type",
    "idempotency-key",
    "x-tenant-id",
    "tickwork-bookmark",
    "tickwork-consistency",
}
EXPOSED = {"location", "retry-after", "idempotent-replayed", "tickwork-bookmark"}


@pytest.fixture(autouse=True)
def _front_end_allowed(settings):
    settings.CORS_ALLOWED_ORIGINS = [FRONT_END]


def _split(value: str) -> set[str]:
    return {part.strip().lower() for part in value.split(",") if part.strip()}


def _preflight(origin: str, method: str = "POST", path: str = "/v1/projects"):
    return APIClient().options(
        path,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": "authorization, content-type, idempotency-key",
        },
    )


@pytest.mark.django_db
def test_a_preflight_from_the_front_end_is_answered_before_authentication():
    response = _preflight(FRONT_END)

    assert response.status_code in (200, 204)
    assert response["Access-Control-Allow-Origin"] == FRONT_END
    assert _split(response["Access-Control-Allow-Methods"]) == {
        "get",
        "post",
        "patch",
        "put",
        "delete",
    }
    assert _split(response["Access-Control-Allow-Headers"]) == ALLOWED_HEADERS
    assert response["Access-Control-Max-Age"] == "600"
    assert "Access-Control-Allow-Credentials" not in response
    assert "WWW-Authenticate" not in response


@pytest.mark.django_db
def test_a_preflight_from_another_origin_gets_no_cors_header():
    response = _preflight(ELSEWHERE)

    assert not [name for name in response.headers if name.lower().startswith("access-control")]


@pytest.mark.django_db
def test_an_answer_to_the_front_end_exposes_the_headers_a_client_reads(alice):
    client = alice.client()

    response = client.post(
        "/v1/projects",
        {"name": "From the browser"},
        format="json",
        headers={"Origin": FRONT_END, "Idempotency-Key": str(uuid.uuid4())},
    )

    assert response.status_code == 202
    assert response["Access-Control-Allow-Origin"] == FRONT_END
    assert _split(response["Access-Control-Expose-Headers"]) == EXPOSED
    assert "Access-Control-Allow-Credentials" not in response
    assert "Location" in response


@pytest.mark.django_db
def test_a_401_to_the_front_end_carries_the_cors_headers():
    response = APIClient().get("/v1/projects", headers={"Origin": FRONT_END})

    assert response.status_code == 401
    assert response["Access-Control-Allow-Origin"] == FRONT_END
    assert _split(response["Access-Control-Expose-Headers"]) == EXPOSED


@pytest.mark.django_db
def test_a_429_to_the_front_end_carries_the_cors_headers_and_retry_after(settings):
    settings.THROTTLE_RATE_ANON = "1/hour"
    client = APIClient()
    client.get("/v1/docs", headers={"Origin": FRONT_END})

    response = client.get("/v1/docs", headers={"Origin": FRONT_END})

    assert response.status_code == 429
    assert response["Access-Control-Allow-Origin"] == FRONT_END
    assert "retry-after" in _split(response["Access-Control-Expose-Headers"])
    assert int(response["Retry-After"]) > 0


@pytest.mark.django_db
def test_an_answer_to_another_origin_carries_no_cors_header(alice):
    response = alice.client().get("/v1/projects", headers={"Origin": ELSEWHERE})

    assert response.status_code == 200
    assert not [name for name in response.headers if name.lower().startswith("access-control")]


@pytest.mark.django_db
def test_no_origin_is_allowed_by_default(settings):
    settings.CORS_ALLOWED_ORIGINS = []

    preflight = _preflight(FRONT_END)
    answer = APIClient().get("/v1/projects", headers={"Origin": FRONT_END})

    for response in (preflight, answer):
        assert not [name for name in response.headers if name.lower().startswith("access-")]


def test_origins_are_read_comma_separated(monkeypatch):
    monkeypatch.setenv("CORS_ALLOWED_ORIGINS", " http://localhost:3000 ,https://app.example.com")

    assert origins("CORS_ALLOWED_ORIGINS") == ["http://localhost:3000", "https://app.example.com"]


@pytest.mark.parametrize(
    "value", ["localhost:3000", "http://localhost:3000/", "ftp://x.example.com", "https://"]
)
def test_a_malformed_origin_stops_start_up_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("CORS_ALLOWED_ORIGINS", value)

    with pytest.raises(ImproperlyConfigured, match="CORS_ALLOWED_ORIGINS"):
        origins("CORS_ALLOWED_ORIGINS")
