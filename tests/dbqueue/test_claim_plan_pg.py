"""The claim statement on PostgreSQL: planned for its own time and batch on every run, its
rows looked up by key whatever the statistics say, and fair across tenants and endpoints
behind a backlog."""

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from dbqueue.claims import OVERSAMPLE, claim, claim_statement
from delivery.models import Notification, WebhookEndpoint
from delivery.scheduler.tick import DUE
from tenancy.models import Tenant
from tests.conftest import requires_postgres
from tests.dbqueue.fair_queues import LEASE, NOW
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant
from tests.support.plans import plan_nodes

pytestmark = [requires_postgres, pytest.mark.django_db]

BACKLOG = 3_000
LIMIT = 16


def seconds_ago(seconds: int) -> datetime:
    return NOW - timedelta(seconds=seconds)


def endpoint(tenant: Tenant) -> WebhookEndpoint:
    return make_endpoint(tenant=tenant, url="https://hooks.example.com/in")


def most_rows_of_one_node(**claim_args: Any) -> int:
    """The most rows any node of the claim statement handled (rows times loops), as run."""
    _, sql, params = claim_statement(DUE, now=NOW, lease=LEASE, limit=LIMIT, **claim_args)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        (document,) = cursor.fetchone()
    plan = (json.loads(document) if isinstance(document, str) else document)[0]["Plan"]
    return max(node["Actual Rows"] * node["Actual Loops"] for node in plan_nodes(plan))


def prepared_claims() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            ["%WITH ranked AS%"],
        )
        return cursor.fetchone()[0]


def forget_the_table_size() -> None:
    """What the planner knows of the table, as if it had never been analyzed: TRUNCATE
    gives it a new, empty file of unknown size (reltuples -1), and the test's transaction
    rolls that back. Without it, an earlier test's ANALYZE of a full table would leave its
    row count behind even though that test rolled back: ANALYZE writes a table's size in
    place, outside the transaction."""
    assert not Notification.objects.exists()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE notifications_notification CASCADE")


def test_a_burst_claimed_before_statistics_caught_up_is_looked_up_by_key():
    # The planner believes the table holds next to nothing, as after a burst inserted
    # moments ago. The claimed rows are still found by key among the ranked ones, not by
    # joining every due row to the ranking one at a time.
    forget_the_table_size()
    tenant = make_tenant()
    make_notifications(
        BACKLOG, tenant=tenant, webhook_endpoint=endpoint(tenant), next_fire_at=seconds_ago(60)
    )

    assert most_rows_of_one_node(cap=LIMIT) <= BACKLOG + OVERSAMPLE * LIMIT


def test_the_claim_is_planned_for_its_own_values_never_prepared():
    if getattr(connection.connection, "prepare_threshold", None) is None:
        pytest.skip("prepared statements are off on this connection (the pooler pass)")
    tenant = make_tenant()
    make_notifications(20, tenant=tenant, next_fire_at=seconds_ago(60))

    for _ in range(5):  # past the connection's prepare threshold
        claim(DUE, now=NOW, lease=LEASE, limit=2)

    assert prepared_claims() == 0


def test_the_first_claim_still_takes_every_tenants_first_row():
    heavy = make_tenant()
    make_notifications(
        BACKLOG, tenant=heavy, webhook_endpoint=endpoint(heavy), next_fire_at=seconds_ago(90)
    )
    lights = [make_tenant() for _ in range(3)]
    singles = {
        make_notifications(1, tenant=light, next_fire_at=seconds_ago(10))[0].pk for light in lights
    }

    taken = claim(DUE, now=NOW, lease=timedelta(seconds=60), limit=4, cap=4)

    assert singles <= {row.pk for row in taken}
    assert len(taken) == 4


def test_a_tenants_second_endpoint_is_not_held_back_by_its_first_endpoints_backlog():
    tenant = make_tenant()
    backlog, fresh = endpoint(tenant), endpoint(tenant)
    make_notifications(
        BACKLOG, tenant=tenant, webhook_endpoint=backlog, next_fire_at=seconds_ago(90)
    )
    waiting = {
        row.pk
        for row in make_notifications(
            3, tenant=tenant, webhook_endpoint=fresh, next_fire_at=seconds_ago(10)
        )
    }

    # The busy endpoint is capped at 4 rows a claim: the rest of the batch is the other's.
    taken = claim(DUE, now=NOW, lease=timedelta(seconds=60), limit=8, cap=4)

    assert waiting <= {row.pk for row in taken}
    assert len(taken) == 7
