"""Pinned SQL per request for the hot paths (auth is 1: the token with its membership).

`transaction=True` so the statements counted are exactly those production runs: the
create's own BEGIN/COMMIT rather than a test transaction's SAVEPOINTs. The budget for a
create is at most 6 data statements; transaction control is listed but not budgeted.
"""

import pytest

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


def test_create_is_four_statements_in_one_transaction(alice, django_assert_num_queries):
    client = warmed_client(alice)

    with django_assert_num_queries(6) as context:
        response = client.post(
            "/v1/projects", {"name": "P"}, format="json", headers={"Idempotency-Key": "q"}
        )

    assert response.status_code == 202
    # the token with its membership, then key, project and job inserted in one transaction
    assert verbs(context) == ["SELECT", "BEGIN", "INSERT", "INSERT", "INSERT", "COMMIT"]
    assert len([v for v in verbs(context) if v not in TRANSACTION_CONTROL]) <= 6


def test_replay_is_three_statements(alice, django_assert_num_queries):
    client = warmed_client(alice)
    headers = {"Idempotency-Key": "q"}
    client.post("/v1/projects", {"name": "P"}, format="json", headers=headers)

    with django_assert_num_queries(5) as context:
        response = client.post("/v1/projects", {"name": "P"}, format="json", headers=headers)

    assert response["Idempotent-Replayed"] == "true"
    # the key insert fails on the unique index and rolls back, then the key is read
    assert verbs(context) == ["SELECT", "BEGIN", "INSERT", "ROLLBACK", "SELECT"]


def test_get_costs_two_queries(alice, django_assert_num_queries):
    project = make_project(alice)
    client = warmed_client(alice)

    with django_assert_num_queries(2):
        assert client.get(f"/v1/projects/{project.id}").status_code == 200


def test_list_costs_two_queries_whatever_the_page_size(alice, django_assert_num_queries):
    for index in range(5):
        make_project(alice, name=f"P{index}")
    client = warmed_client(alice)

    with django_assert_num_queries(2):
        response = client.get("/v1/projects?limit=5")
    assert len(response.json()["results"]) == 5
