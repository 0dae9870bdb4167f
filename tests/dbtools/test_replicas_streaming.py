"""Against a real streaming replica (TEST_REPLICA_URL; `.ci/replica.sh` makes it): through
gunicorn, a read that passes the bookmark of a write always sees it, a replica that stops or
is paused costs no request and no stale bookmarked read, and an unbookmarked read may be
stale (it is served by the replica)."""

import time

import pytest

from dbtools.replicas import Lsn
from tests.conftest import requires_postgres
from tests.dbtools.replica_support import (
    api_with_replica,
    call,
    create_project,
    needs_replica,
    replica_control,
    replica_sql,
    replica_to_itself,  # noqa: F401  (a fixture)
    wait_until_replayed,
)

# They share one replica cluster and stop or pause it: they take turns (replica_to_itself).
pytestmark = [
    requires_postgres,
    needs_replica,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("replica_to_itself"),
]

PAIRS = 1000


def test_reads_with_the_bookmark_of_a_write_never_miss_it(alice, tmp_path):
    wait_until_replayed()
    with api_with_replica(tmp_path) as served:
        stale = 0
        for _ in range(PAIRS):
            path, bookmark = create_project(served, alice.token)
            answer = call(served, "GET", path, alice.token, **{"Tickwork-Bookmark": bookmark})
            stale += answer.status == 404
            assert answer.status in (200, 404), answer.body
            assert Lsn.parse(answer.bookmark) >= Lsn.parse(bookmark)
    assert stale == 0


def test_a_stopped_replica_loses_no_request(alice, tmp_path):
    wait_until_replayed()
    with api_with_replica(tmp_path) as served:
        path, _ = create_project(served, alice.token)
        wait_until_replayed()
        assert call(served, "GET", path, alice.token).status == 200  # the replica is in use
        replica_control("stop")
        try:
            statuses = [call(served, "GET", path, alice.token).status for _ in range(40)]
            created, bookmark = create_project(served, alice.token)
            fresh = call(served, "GET", created, alice.token, **{"Tickwork-Bookmark": bookmark})
        finally:
            replica_control("start")
    assert statuses == [200] * 40
    assert fresh.status == 200


def test_a_paused_replica_is_bypassed_by_bookmarked_reads_only(alice, tmp_path):
    wait_until_replayed()
    with api_with_replica(tmp_path, REPLICA_MAX_LAG_SECONDS="3600") as served:
        replica_sql("SELECT pg_wal_replay_pause()::text")
        try:
            path, bookmark = create_project(served, alice.token)
            bookmarked = call(served, "GET", path, alice.token, **{"Tickwork-Bookmark": bookmark})
            unbookmarked = call(served, "GET", path, alice.token)
            listed = call(
                served, "GET", "/v1/projects", alice.token, **{"Tickwork-Bookmark": bookmark}
            )
            unlisted = call(served, "GET", "/v1/projects", alice.token)
        finally:
            replica_sql("SELECT pg_wal_replay_resume()::text")
    assert bookmarked.status == 200
    # Without a bookmark the paused replica answers: it has not seen the project (D1's
    # first-unconstrained), which also shows that reads do go to the replica ...
    assert unbookmarked.status == 404
    # ... list pages included.
    project_id = path.rstrip("/").rsplit("/", 1)[-1]
    assert project_id in {project["id"] for project in listed.body["results"]}
    assert project_id not in {project["id"] for project in unlisted.body["results"]}


def test_a_replica_lagging_past_the_limit_is_not_used(alice, tmp_path):
    wait_until_replayed()
    replica_sql("SELECT pg_wal_replay_pause()::text")
    try:
        with api_with_replica(tmp_path, REPLICA_MAX_LAG_SECONDS="1") as served:
            path, _ = create_project(served, alice.token)
            wait_until_lagging(seconds=1)
            unbookmarked = call(served, "GET", path, alice.token)
    finally:
        replica_sql("SELECT pg_wal_replay_resume()::text")
    assert unbookmarked.status == 200  # read from the primary


def wait_until_lagging(seconds: float) -> None:
    """Until the paused replica is behind by more than `seconds` (it has WAL it has not
    replayed, and the last transaction it replayed is older than that)."""
    deadline = time.monotonic() + 30
    lag_sql = (
        "SELECT pg_last_wal_receive_lsn() > pg_last_wal_replay_lsn() AND "
        f"now() - pg_last_xact_replay_timestamp() > interval '{seconds + 0.2} seconds'"
    )
    while not replica_sql(lag_sql):
        assert time.monotonic() < deadline, "the paused replica never lagged"
        time.sleep(0.1)
