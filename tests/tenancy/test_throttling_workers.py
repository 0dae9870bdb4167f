"""A limit holds across processes: `gunicorn -w 3` for real, on a SQLite file and on
PostgreSQL, lets through exactly the limit of requests spread over all three workers.

The rates are per hour and a window starts at its key's first request, so no window can
end within the test.
"""

import json

import pytest
from django.db import connection

from tests.conftest import requires_postgres, sqlite_only
from tests.support.gunicorn import app_env, gunicorn, manage, spread_requests
from tests.support.sqlite_files import copy_of

LIMITS = {"THROTTLE_RATE_USER": "10/hour", "THROTTLE_RATE_AUTH_FAILURES": "5/hour"}


def postgres_url() -> str:
    settings_dict = connection.settings_dict
    return (
        f"postgres://{settings_dict['USER']}@{settings_dict['HOST'] or '127.0.0.1'}:"
        f"{settings_dict['PORT'] or 5432}/{settings_dict['NAME']}"
    )


# The mark (not a fixture looked up at run time) sets up the test database even when this is
# the first test of the run to need one.
ON_POSTGRES = [requires_postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(
    params=[pytest.param("sqlite", marks=sqlite_only), pytest.param("postgres", marks=ON_POSTGRES)]
)
def app(request, tmp_path):
    """The environment of an app process on a migrated database of its own kind."""
    if request.param == "postgres":
        # The test database must exist (and be named) before its URL is read.
        return app_env(postgres_url(), **LIMITS)
    database = copy_of(request.getfixturevalue("migrated_sqlite"), tmp_path / "db.sqlite3")
    return app_env(f"sqlite:///{database}", **LIMITS)


def bearer(env: dict[str, str]) -> dict[str, str]:
    grant = json.loads(
        manage(env, "create_tenant", "Workers", "--owner", "w@example.com", "--json")
    )
    return {"Authorization": f"Bearer {grant['token']}"}


def test_three_workers_let_through_exactly_the_user_limit(app, tmp_path):
    headers = bearer(app)
    with gunicorn(app, tmp_path) as served:
        answers = spread_requests(served, "/v1/me", headers, count=40)

        assert len(served.worker_pids()) == 3
    statuses = [answer.status for answer in answers]
    assert statuses.count(200) == 10
    assert statuses.count(429) == 30
    refused = [answer for answer in answers if answer.status == 429]
    assert all(answer.headers["Content-Type"] == "application/problem+json" for answer in refused)
    assert all(1 <= int(answer.headers["Retry-After"]) <= 3600 for answer in refused)


def test_three_workers_refuse_an_address_after_its_failed_authentications(app, tmp_path):
    headers = bearer(app)
    with gunicorn(app, tmp_path) as served:
        wrong = spread_requests(
            served, "/v1/me", {"Authorization": "Bearer tkw_0123456789ab_wrong"}, count=8
        )
        right = spread_requests(served, "/v1/me", headers, count=3)

        assert len(served.worker_pids()) == 3
    assert [answer.status for answer in wrong] == [401] * 5 + [429] * 3
    assert [answer.status for answer in right] == [429] * 3
