"""The anonymous routes that take an address do the same work whether or not it has an
account: the same statements, in the same order, on the same tables, and the same bytes
back, so neither a bookmark nor the database's write volume nor the time tells them apart."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.models import Job

pytestmark = pytest.mark.django_db

# Values differ from one request to the next (addresses, ids, times); statements must not.
_VALUES = re.compile(r"\"s\d+_x\d+\"|'(?:[^']|'')*'|\b[0-9a-f]{32}\b|\b\d+(?:\.\d+)?\b")


def _work(client, path, body):
    with CaptureQueriesContext(connection) as queries:
        response = client.post(path, body, format="json")
    return response, [_VALUES.sub("?", query["sql"]) for query in queries]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/signin", lambda email: {"email": email, "captcha_token": "t"}),
        (
            "/v1/signup",
            lambda email: {"email": email, "tenant_name": "Team", "captcha_token": "t"},
        ),
    ],
    ids=["signin", "signup"],
)
def test_known_and_unknown_addresses_cost_the_same_statements(anonymous, alice, path, body):
    _work(anonymous, path, body("warm-up@example.com"))  # first-use rows (the mail tenant)

    known, known_work = _work(anonymous, path, body("alice@example.com"))
    unknown, unknown_work = _work(anonymous, path, body("nobody@example.com"))

    assert known.status_code == unknown.status_code == 202
    assert known.content == unknown.content
    assert known.headers == unknown.headers
    assert known_work == unknown_work
    assert known_work  # the request was recorded, not dropped


def test_a_signin_request_is_one_queued_job_whatever_the_address(anonymous, alice):
    for email in ("alice@example.com", "nobody@example.com"):
        anonymous.post("/v1/signin", {"email": email, "captcha_token": "t"}, format="json")

    assert sorted(job.payload["email"] for job in Job.objects.filter(kind="signin-link")) == [
        "alice@example.com",
        "nobody@example.com",
    ]
