"""RFC 9457 problem details for every non-2xx status the API produces."""

import io
from collections.abc import Callable

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.test import RequestFactory

import projects.views
from projects.models import Project
from tests.support.problems import assert_problem


def test_routing_404_is_a_problem(alice, settings):
    settings.DEBUG = False
    assert_problem(alice.client().get("/v1/nothing-here"), 404)


@pytest.mark.parametrize("path", ["/v1/nothing-here", "/v1/projects/not-a-uuid", "/v1/projects/"])
def test_routing_404_is_a_problem_with_debug_on_too(alice, settings, path):
    settings.DEBUG = True

    body = assert_problem(alice.client().get(path), 404)

    assert body["detail"] == "No resource matches this URL."


def test_a_post_to_a_missing_route_is_a_404_problem_not_a_csrf_refusal(alice):
    assert_problem(alice.client().post("/v1/nothing-here", {}, format="json"), 404)


def test_a_405_is_a_problem_with_debug_on_too(alice, settings):
    settings.DEBUG = True

    assert_problem(alice.client().delete("/v1/projects"), 405)


def test_405_carries_allow(alice):
    response = alice.client().delete("/v1/projects")

    assert_problem(response, 405)
    assert set(response["Allow"].replace(" ", "").split(",")) >= {"GET", "POST"}


# On PostgreSQL the answer's Tickwork-Bookmark reads the primary's WAL position (cached
# for a second), so even a 401 may touch the database.
def test_missing_authorization_is_401_with_bearer_challenge(anonymous, db):
    response = anonymous.get("/v1/projects")

    assert_problem(response, 401)
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("header", ["Bearer", "Bearer a b", "Bearer tkw_nope", "Bearer clé"])
def test_bad_credentials_are_401(db, anonymous, header):
    response = anonymous.get("/v1/projects", headers={"Authorization": header})

    assert_problem(response, 401)
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("header", ["Token tkw_abc", "Basic YWxpY2U6c2VjcmV0", "tkw_bare"])
def test_another_authorization_scheme_is_401_naming_bearer(db, anonymous, header):
    response = anonymous.get("/v1/projects", headers={"Authorization": header})

    body = assert_problem(response, 401)
    assert "Bearer" in body["detail"]
    assert header.split()[-1] not in body["detail"]
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_foreign_tenant_is_403(alice, charlie):
    assert_problem(charlie.client(tenant=alice.tenant).get("/v1/projects"), 403)


@pytest.mark.parametrize("value", ["nope", "' OR 1=1 --", "x" * 5000, "\x00"])
def test_weird_tenant_header_is_400(alice, value):
    client = alice.client()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {alice.token}", HTTP_X_TENANT_ID=value)

    assert_problem(client.get("/v1/projects"), 400)


def test_content_length_over_the_limit_is_413(alice, settings):
    settings.MAX_REQUEST_BYTES = 100
    body = '{"name": "' + "x" * 200 + '"}'

    response = alice.client().post(
        "/v1/projects", body, content_type="application/json", headers={"Idempotency-Key": "k"}
    )

    assert_problem(response, 413)
    assert not Project.objects.exists()


def _chunked(alice, body: bytes):
    environ = RequestFactory().post("/v1/projects").environ
    del environ["CONTENT_LENGTH"]
    environ.update(
        {
            "wsgi.input": io.BytesIO(body),
            "CONTENT_TYPE": "application/json",
            "HTTP_TRANSFER_ENCODING": "chunked",
            "HTTP_AUTHORIZATION": f"Bearer {alice.token}",
            "HTTP_IDEMPOTENCY_KEY": "chunked",
        }
    )
    statuses: list[str] = []

    def start_response(
        status: str, headers: list[tuple[str, str]], exc_info: object = None
    ) -> Callable[[bytes], object]:
        statuses.append(status)
        return _unused_write

    chunks = WSGIHandler()(environ, start_response)
    return int(statuses[0].split()[0]), b"".join(chunks)


def _unused_write(data: bytes) -> None:
    raise AssertionError("Django returns its body; it never calls WSGI's write()")


@pytest.mark.django_db(transaction=True)
def test_chunked_body_over_the_limit_is_413(alice, settings):
    settings.MAX_REQUEST_BYTES = 100

    status, content = _chunked(alice, b'{"name": "' + b"x" * 200 + b'"}')

    assert status == 413
    assert b"request-too-large" in content
    assert not Project.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_chunked_body_within_the_limit_is_read(alice, settings):
    settings.MAX_REQUEST_BYTES = 100

    status, _ = _chunked(alice, b'{"name": "Chunked"}')

    assert status == 202
    assert Project.objects.get().name == "Chunked"


def test_unsupported_media_type_is_415(alice):
    response = alice.client().post(
        "/v1/projects", "<p/>", content_type="text/xml", headers={"Idempotency-Key": "k"}
    )

    assert_problem(response, 415)


def test_throttled_requests_are_429_with_retry_after(alice, settings):
    settings.THROTTLE_RATE_USER = "2/hour"
    client = alice.client()
    assert [client.get("/v1/projects").status_code for _ in range(2)] == [200, 200]

    response = client.get("/v1/projects")

    assert_problem(response, 429)
    assert int(response["Retry-After"]) >= 1


def test_crash_is_a_500_problem_without_internals(alice, monkeypatch, settings):
    settings.DEBUG = False

    def crash(**kwargs):
        raise RuntimeError("SELECT secret FROM vault; password=hunter2")

    monkeypatch.setattr(projects.views, "project_create", crash)
    client = alice.client()
    client.raise_request_exception = False

    response = client.post(
        "/v1/projects", {"name": "P"}, format="json", headers={"Idempotency-Key": "k"}
    )

    body = assert_problem(response, 500)
    text = response.content.decode()
    assert "hunter2" not in text and "SELECT" not in text and "Traceback" not in text
    assert set(body) == {"type", "title", "status", "detail"}


def test_an_accept_header_without_json_is_406(alice):
    response = alice.client().get("/v1/me", HTTP_ACCEPT="text/html")

    assert_problem(response, 406)


@pytest.fixture
def database_unreachable():
    """The default database pointed where nothing answers (a port nobody listens on, a file
    in a folder that does not exist), then back."""
    from django.db import connection

    settings_dict = connection.settings_dict
    saved = dict(settings_dict)
    if connection.vendor == "postgresql":
        settings_dict.update(HOST="127.0.0.1", PORT="1")
    else:
        settings_dict.update(NAME="/nonexistent-folder/tickwork.sqlite3")
    connection.close()
    yield
    settings_dict.clear()
    settings_dict.update(saved)
    connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_database_that_cannot_be_reached_is_a_503_problem_with_retry_after(
    alice, settings, database_unreachable
):
    settings.DEBUG = False
    client = alice.client()
    client.raise_request_exception = False

    answers = [
        client.get("/v1/projects"),
        client.post("/v1/projects", {"name": "P"}, format="json", headers={"Idempotency-Key": "k"}),
    ]

    for response in answers:
        body = assert_problem(response, 503)
        assert body["type"].endswith("/unavailable")
        assert int(response["Retry-After"]) >= 1
        assert "nonexistent" not in response.content.decode()
