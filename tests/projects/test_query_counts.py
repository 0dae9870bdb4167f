"""Pinned SQL per request for the hot paths (auth is 1: the token with its membership and
whether the address is over its failed-authentication limit; the user's rate-limit count is
1 more, an upsert that every web worker sees).

`transaction=True` so the statements counted are exactly those production runs: the
create's own BEGIN/COMMIT rather than a test transaction's SAVEPOINTs. The budget for a
create is at most 6 data statements; transaction control is listed but not budgeted. On
PostgreSQL the create's three inserts are one statement (WITH … INSERT), atomic without a
transaction around it, and every write answer ends with the primary's WAL position for its
`Tickwork-Bookmark` (`SELECT pg_current_wal_lsn()`, README: Scale); a read's bookmark comes
from a position cached for a second, which the warm-up request fills (held here for the
whole test so the count does not depend on how fast it runs).
"""

import pytest
from django.db import connection

from tests.projects.factories import make_project

pytestmark = pytest.mark.django_db(transaction=True)


TRANSACTION_CONTROL = {"BEGIN", "COMMIT", "ROLLBACK"}


def warmed_client(actor):
    """A client whose token's last_used_at is fresh, so no UPDATE joins the count."""
    client = actor.client()
    assert client.get("/v1/me").status_code == 200
    return client


def verbs(context) -> list[str]:
    return [query["sql"].split()[0].upper() for query in context.captured_queries]


POSTGRES = connection.vendor == "postgresql"


def test_create_inserts_key_project_and_job_after_one_read(alice, django_assert_num_queries):
    client = warmed_client(alice)

    with django_assert_num_queries(5 if POSTGRES else 9) as context:
        response = client.post(
            "/v1/projects", {"name": "P"}, format="json", headers={"Idempotency-Key": "q"}
        )

    assert response.status_code == 202
    # the token with its membership, the rate-limit count, the endpoints subscribed to
    # project.created (none here), then key, project, the project.created message and job
    # inserted all or none (and on PostgreSQL the bookmark's WAL position)
    if POSTGRES:
        assert verbs(context) == ["SELECT", "INSERT", "SELECT", "WITH", "SELECT"]
        assert "pg_current_wal_lsn()" in context.captured_queries[4]["sql"]
        inserts = context.captured_queries[3]["sql"]
    else:
        assert verbs(context) == [
            "SELECT", "INSERT", "SELECT", "BEGIN", "INSERT", "INSERT", "INSERT", "INSERT",
            "COMMIT",
        ]  # fmt: skip
        inserts = " ".join(query["sql"] for query in context.captured_queries[4:8])
    tables = ['INSERT INTO "tenancy_operationkey"', 'INSERT INTO "projects_project"']
    tables += ['INSERT INTO "notifications_message"', 'INSERT INTO "jobs_job"']
    assert [inserts.index(table) for table in tables] == sorted(inserts.index(t) for t in tables)
    assert 'INTO "dbtools_ratewindow"' in context.captured_queries[1]["sql"]
    assert len([v for v in verbs(context) if v not in TRANSACTION_CONTROL]) <= 7


def test_replay_is_five_statements_and_the_bookmark(alice, django_assert_num_queries):
    client = warmed_client(alice)
    headers = {"Idempotency-Key": "q"}
    client.post("/v1/projects", {"name": "P"}, format="json", headers=headers)

    with django_assert_num_queries(6 if POSTGRES else 7) as context:
        response = client.post("/v1/projects", {"name": "P"}, format="json", headers=headers)

    assert response["Idempotent-Replayed"] == "true"
    # after the token, the rate-limit count and the subscribed endpoints, the insert fails
    # on the key's unique index and changes nothing, then the key is read
    if POSTGRES:
        assert verbs(context) == ["SELECT", "INSERT", "SELECT", "WITH", "SELECT", "SELECT"]
    else:
        assert verbs(context) == [
            "SELECT", "INSERT", "SELECT", "BEGIN", "INSERT", "ROLLBACK", "SELECT"
        ]  # fmt: skip


def test_get_costs_three_queries(alice, django_assert_num_queries):
    project = make_project(alice)
    client = warmed_client(alice)

    with django_assert_num_queries(3):
        assert client.get(f"/v1/projects/{project.id}").status_code == 200


def test_list_costs_three_queries_whatever_the_page_size(alice, django_assert_num_queries):
    for index in range(5):
        make_project(alice, name=f"P{index}")
    client = warmed_client(alice)

    with django_assert_num_queries(3):
        response = client.get("/v1/projects?limit=5")
    assert len(response.json()["results"]) == 5


def test_a_page_of_50_and_the_next_are_three_statements_each(alice, django_assert_num_queries):
    for index in range(55):
        make_project(alice, name=f"P{index}")
    client = warmed_client(alice)

    # the token with its membership, the rate-limit count, the page with each project's job
    with django_assert_num_queries(3) as context:
        first = client.get("/v1/projects?limit=50").json()
    with django_assert_num_queries(3):
        second = client.get(first["next"]).json()

    assert 'WHERE "projects_project"."tenant_id" = ' in context.captured_queries[2]["sql"]
    assert (len(first["results"]), len(second["results"])) == (50, 5)
    assert all(project["job"]["status"] == "pending" for project in first["results"])
