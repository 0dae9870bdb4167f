"""Tickwork-Bookmark on every API answer, the routing headers' validation, and the router's
choices (writes, transactions, workers and migrations on the primary)."""

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, transaction

from dbtools import replicas
from dbtools.replicas import Lsn, ReplicaRouter, Routing
from projects.models import Project
from tests.conftest import requires_postgres
from tests.dbtools.replica_support import call, create_project
from tests.support.gunicorn import app_env, gunicorn
from tests.support.processes import subprocess_env

pytestmark = pytest.mark.django_db


def test_every_api_answer_to_an_authenticated_caller_carries_a_bookmark(alice):
    answers = [
        alice.client().get("/v1/projects"),
        alice.client().post(
            "/v1/projects", {"name": "Relaunch"}, format="json", HTTP_IDEMPOTENCY_KEY="k-1"
        ),
        alice.client().get("/v1/projects/00000000-0000-0000-0000-000000000000"),
    ]
    assert [answer.status_code for answer in answers] == [200, 202, 404]
    positions = [Lsn.parse(answer["Tickwork-Bookmark"]) for answer in answers]
    if connection.vendor == "sqlite":
        assert set(positions) == {Lsn(0)}  # one database: nothing to be stale
    else:
        assert positions[1] >= positions[0]  # the write is at or after the read before it


def test_a_malformed_routing_header_from_an_anonymous_caller_gets_its_401_first(anonymous):
    answer = anonymous.get("/v1/projects", HTTP_TICKWORK_BOOKMARK="yesterday")
    assert answer.status_code == 401
    assert "Tickwork-Bookmark" not in answer


def test_no_anonymous_answer_and_no_public_route_carries_a_bookmark(alice, anonymous):
    # What the database wrote for someone else is no stranger's to read: a bookmark tells a
    # client about its own writes only.
    answers = [
        anonymous.get("/v1/projects"),
        anonymous.post("/v1/projects", {"name": "x"}, format="json"),
        anonymous.post("/v1/signin", {"email": "alice@example.com"}, format="json"),
        anonymous.post("/v1/signin", {"email": "nobody@example.com"}, format="json"),
        anonymous.post("/v1/invitations/preview", {"token": "x" * 43}, format="json"),
        alice.client().post("/v1/invitations/preview", {"token": "x" * 43}, format="json"),
        anonymous.post("/v1/unsubscribe/nope", format="json"),
    ]
    assert all(answer.status_code < 500 for answer in answers)
    assert [answer.get("Tickwork-Bookmark") for answer in answers] == [None] * len(answers)


def test_a_non_api_answer_carries_none(client):
    assert "Tickwork-Bookmark" not in client.get("/healthz")


def test_a_bookmark_sent_back_is_honoured_and_echoed_at_least(alice):
    created = alice.client().post(
        "/v1/projects", {"name": "Relaunch"}, format="json", HTTP_IDEMPOTENCY_KEY="k-2"
    )
    bookmark = created["Tickwork-Bookmark"]
    read = alice.client().get(created["Location"], HTTP_TICKWORK_BOOKMARK=bookmark)
    assert read.status_code == 200
    assert Lsn.parse(read["Tickwork-Bookmark"]) >= Lsn.parse(bookmark)
    primary = alice.client().get("/v1/projects", HTTP_TICKWORK_CONSISTENCY="primary")
    assert primary.status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {"HTTP_TICKWORK_BOOKMARK": "yesterday"},
        {"HTTP_TICKWORK_BOOKMARK": "0/0/0"},
        {"HTTP_TICKWORK_BOOKMARK": "123456789/0"},
        {"HTTP_TICKWORK_BOOKMARK": "\uff10/\uff10"},  # full-width digits
        {"HTTP_TICKWORK_CONSISTENCY": "replica"},
        {"HTTP_TICKWORK_CONSISTENCY": ""},
    ],
)
def test_a_malformed_routing_header_is_a_400_problem(alice, headers):
    answer = alice.client().get("/v1/projects", **headers)
    assert answer.status_code == 400
    assert answer["Content-Type"] == "application/problem+json"
    assert answer.json()["type"].endswith("/bad-routing-header")
    assert "Tickwork-Bookmark" in answer


@pytest.mark.parametrize("text", ["0/0", "16/B374D848", "FFFFFFFF/FFFFFFFF", "1/A"])
def test_a_log_position_reads_and_prints_as_postgresql_does(text):
    assert str(Lsn.parse(text)) == text.upper()


def test_log_positions_order_by_both_halves():
    assert Lsn.parse("0/FFFFFFFF") < Lsn.parse("1/0") < Lsn.parse("1/1")


def test_without_routing_every_read_and_write_is_on_the_primary():
    router = ReplicaRouter()
    assert router.db_for_read(Project) == DEFAULT_DB_ALIAS  # workers, commands
    assert router.db_for_write(Project) == DEFAULT_DB_ALIAS
    assert router.allow_migrate("replica_0", "projects") is False
    assert router.allow_migrate(DEFAULT_DB_ALIAS, "projects") is True


@pytest.mark.django_db(transaction=True)  # not inside the test's own transaction
def test_an_api_read_follows_its_routing_except_inside_a_transaction():
    router = ReplicaRouter()
    token = replicas.routing.set(Routing("replica_0", Lsn(0)))
    try:
        outside = router.db_for_read(Project)
        with transaction.atomic():
            inside = router.db_for_read(Project)
        write = router.db_for_write(Project)
    finally:
        replicas.routing.reset(token)
    assert (outside, inside, write) == ("replica_0", DEFAULT_DB_ALIAS, DEFAULT_DB_ALIAS)


def test_without_replicas_reads_are_routed_to_the_primary():
    assert replicas.route_read(Lsn(5), primary_only=False).read_alias == DEFAULT_DB_ALIAS
    assert replicas.route_read(None, primary_only=True).read_alias == DEFAULT_DB_ALIAS


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_a_replica_that_refuses_connections_fails_no_request(alice, tmp_path):
    unreachable = "postgres://postgres@127.0.0.1:9/tickwork"  # the discard port: nothing there
    env = app_env(
        subprocess_env()["DATABASE_URL"],
        DATABASE_REPLICA_URLS=unreachable,
        THROTTLE_RATE_USER="1000000/min",
    )
    with gunicorn(env, tmp_path, workers=2) as served:
        path, bookmark = create_project(served, alice.token)
        reads = [call(served, "GET", path, alice.token) for _ in range(10)]
        bookmarked = call(served, "GET", path, alice.token, **{"Tickwork-Bookmark": bookmark})
    assert [read.status for read in reads] == [200] * 10
    assert bookmarked.status == 200
    assert Lsn.parse(bookmarked.bookmark) >= Lsn.parse(bookmark)
