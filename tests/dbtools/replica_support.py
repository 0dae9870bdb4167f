"""The API under gunicorn with a read replica, and plain HTTP calls to it, for the replica
tests. TEST_REPLICA_URL names the streaming replica's server (`.ci/replica.sh` makes one on
127.0.0.1:5433); the app reads the test database there under the same name."""

import fcntl
import http.client
import json
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from django.db import connection

from tests.support.gunicorn import ROOT, Served, app_env, gunicorn
from tests.support.processes import subprocess_env

REPLICA_URL = os.environ.get("TEST_REPLICA_URL", "").strip()
needs_replica = pytest.mark.skipif(
    not REPLICA_URL, reason="needs a streaming replica: TEST_REPLICA_URL (see .ci/replica.sh)"
)


@pytest.fixture
def replica_to_itself() -> Iterator[None]:
    """The replica cluster is one for every pytest process on this machine (each xdist
    worker, each run), and these tests stop or pause it: they take turns, under an flock
    named after the replica's address."""
    parts = urlsplit(REPLICA_URL)
    lock = Path(tempfile.gettempdir()) / f"tickwork-replica-{parts.hostname}-{parts.port}.lock"
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)


@dataclass(frozen=True)
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: dict

    @property
    def bookmark(self) -> str:
        return self.headers["Tickwork-Bookmark"]


def replica_database_url() -> str:
    """TEST_REPLICA_URL's server, this test database's name."""
    parts = urlsplit(REPLICA_URL)
    return urlunsplit(parts._replace(path=f"/{connection.settings_dict['NAME']}"))


def replica_sql(sql: str) -> object:
    with psycopg.connect(replica_database_url(), autocommit=True) as replica:
        row = replica.execute(sql).fetchone()
    assert row is not None, f"the replica returned no row for {sql}"
    return row[0]


def replica_control(action: str) -> None:
    """Stop or start the replica cluster (`.ci/replica.sh stop|start`)."""
    subprocess.run(["bash", str(ROOT / ".ci/replica.sh"), action], check=True, timeout=120)


def wait_until_replayed() -> None:
    """Until the replica has replayed everything committed on the primary so far."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()::text")
        target = cursor.fetchone()[0]
    deadline = time.monotonic() + 30
    while not replica_sql(f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn"):
        assert time.monotonic() < deadline, "the replica did not catch up in 30 s"
        time.sleep(0.05)


@contextmanager
def api_with_replica(tmp_path: Path, **overrides: str) -> Iterator[Served]:
    env = app_env(
        subprocess_env()["DATABASE_URL"],
        DATABASE_REPLICA_URLS=replica_database_url(),
        THROTTLE_RATE_USER="1000000/min",
        **overrides,
    )
    with gunicorn(env, tmp_path, workers=2) as served:
        yield served


def call(served: Served, method: str, path: str, token: str, **headers: str) -> Answer:
    body = None
    request_headers = {"Authorization": f"Bearer {token}", **headers}
    if method == "POST":
        body = json.dumps({"name": f"p-{uuid.uuid4()}"})
        request_headers["Content-Type"] = "application/json"
        request_headers["Idempotency-Key"] = str(uuid.uuid4())
    client = http.client.HTTPConnection("127.0.0.1", served.port, timeout=60)
    try:
        client.request(method, path, body=body, headers=request_headers)
        response = client.getresponse()
        return Answer(response.status, response.headers, json.loads(response.read() or b"{}"))
    finally:
        client.close()


def create_project(served: Served, token: str) -> tuple[str, str]:
    """POST a project: (its path, the answer's bookmark)."""
    answer = call(served, "POST", "/v1/projects", token)
    assert answer.status == 202, answer.body
    return answer.headers["Location"], answer.bookmark
