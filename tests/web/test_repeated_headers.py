"""A header that takes one value, sent twice: WSGI servers join the lines with "," (gunicorn
and runserver alike), so the application sees one folded value; it is a 400
`repeated-header` problem before anything is written, where two Idempotency-Keys used to be
stored as one key matching neither."""

import pytest
from rest_framework.test import APIClient

from projects.models import Project
from tenancy.models import OperationKey, SignupRequest
from tests.conftest import requires_postgres
from tests.support.gunicorn import app_env, connect, gunicorn, read_answer
from tests.support.processes import subprocess_env
from tests.web.write_endpoints import assert_problem
from web.headers import is_repeated

pytestmark = pytest.mark.django_db

PROJECT = {"name": "Relaunch"}


def _bearer(actor) -> APIClient:
    """Authenticated, with no X-Tenant-ID of its own (the actor has one tenant)."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {actor.token}")
    return client


def _create(client, **headers):
    return client.post("/v1/projects", PROJECT, format="json", headers=headers)


def assert_repeated(response, *names):
    assert response.status_code == 400, response.content
    problem = assert_problem(response)
    assert problem["type"].endswith("/repeated-header")
    assert sorted(problem["errors"]) == sorted(names)


@pytest.mark.parametrize("folded", ["k-1,k-2", "k-1,k-1", '"k-1","k-2"', 'k-1, "k-2"'])
def test_a_repeated_idempotency_key_is_400_and_creates_nothing(alice, folded):
    assert_repeated(_create(_bearer(alice), **{"Idempotency-Key": folded}), "Idempotency-Key")
    assert (Project.objects.count(), OperationKey.objects.count()) == (0, 0)


def test_a_quoted_key_keeps_its_own_comma(alice):
    first = _create(_bearer(alice), **{"Idempotency-Key": '"a,b"'})
    replay = _create(_bearer(alice), **{"Idempotency-Key": '"a,b"'})

    assert (first.status_code, replay["Idempotent-Replayed"]) == (202, "true")
    assert OperationKey.objects.get().key == "a,b"


@pytest.mark.parametrize(
    ("header", "folded"),
    [
        ("X-Tenant-ID", "{tenant},{tenant}"),
        ("Tickwork-Bookmark", "0/0,0/1"),
        ("Idempotency-Key", "k-1,k-1"),
    ],
)
def test_each_single_value_header_repeated_is_400_on_any_route(alice, header, folded):
    value = folded.format(tenant=alice.tenant.id)
    listed = _bearer(alice).get("/v1/projects", headers={header: value})
    created = _create(_bearer(alice), **{"Idempotency-Key": "k", header: value})

    assert_repeated(listed, header)
    assert_repeated(created, header)
    assert Project.objects.count() == 0


def test_every_repeated_header_is_named(alice):
    tenant = str(alice.tenant.id)
    headers = {"X-Tenant-ID": f"{tenant},{tenant}", "Tickwork-Bookmark": "0/0,0/0"}
    assert_repeated(_bearer(alice).get("/v1/jobs", headers=headers), *headers)


def test_an_anonymous_caller_gets_its_401_first(anonymous, alice):
    answer = anonymous.get("/v1/projects", headers={"X-Tenant-ID": f"{alice.tenant.id},x"})
    assert answer.status_code == 401


def test_a_public_route_refuses_a_repeated_key_before_any_check(anonymous, signup_on):
    body = {"email": "ada@example.com", "tenant_name": "A", "captcha_token": "t"}
    answer = anonymous.post("/v1/signup", body, format="json", headers={"Idempotency-Key": "a,b"})

    assert_repeated(answer, "Idempotency-Key")
    assert SignupRequest.objects.count() == 0


@pytest.mark.parametrize(
    ("value", "repeated"),
    [
        ("abc", False),
        ('"a,b"', False),
        ('"a\\",b"', False),
        ("a,b", True),
        ('"a","b"', True),
        ('"a\\"",b', True),
        ("0/0,0/1", True),
    ],
)
def test_a_comma_outside_quotes_is_a_repeat(value, repeated):
    assert is_repeated(value) is repeated


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_gunicorn_joins_a_repeated_key_and_the_answer_is_400(alice, tmp_path):
    """Two header lines on the wire, through a real gunicorn: it folds them as the tests
    above send them, and no project is made."""
    body = b'{"name": "Relaunch"}'
    request = (
        b"POST /v1/projects HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        b"Authorization: Bearer " + alice.token.encode() + b"\r\n"
        b"Content-Type: application/json\r\n"
        b"Idempotency-Key: k-1\r\nIdempotency-Key: k-2\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    env = app_env(subprocess_env()["DATABASE_URL"])
    with gunicorn(env, tmp_path, workers=1) as served, connect(served.port) as connection:
        connection.sendall(request)
        answer = read_answer(connection)

    assert answer.status == 400
    assert answer.headers["Content-Type"] == "application/problem+json"
    assert Project.objects.count() == 0
