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
from jobs.consumer import JOB_CLAIM
from jobs.models import TASK_KIND, Job
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


DEEP = 100_000


def fill_deep_backlog(*, tenants: int, endpoints: int, analyze: bool = True) -> None:
    """DEEP due rows over `endpoints` endpoints of `tenants` tenants, interleaved as a fan-out
    writes them, then fresh statistics (unless not `analyze`)."""
    owners = [make_tenant() for _ in range(tenants)]
    for k in range(endpoints):
        make_endpoint(tenant=owners[k % tenants], url=f"https://hooks.example.com/{k}")
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO notifications_notification (
                id, tenant_id, webhook_endpoint_id, channels, email_to, subject, body, rrule,
                timezone, next_fire_at, occurrence, error_count, max_attempts, state,
                dead_letter_reason, claim_token, unfinished_claims, channel_state,
                created_at, updated_at)
            SELECT gen_random_uuid(), e.tenant_id, e.id, '["webhook"]', '[]', 'S', 'B', '',
                   'UTC', %(due)s + make_interval(secs => n / 1000.0), 1, 0, 3, 'scheduled',
                   '', 0, 0, '{}', %(due)s, %(due)s
            FROM generate_series(0, %(count)s - 1) AS n
            JOIN (SELECT id, tenant_id, row_number() OVER (ORDER BY id) - 1 AS k
                  FROM notifications_webhookendpoint) AS e ON e.k = n %% %(endpoints)s
            """,
            {"due": seconds_ago(3600), "count": DEEP, "endpoints": endpoints},
        )
        if analyze:
            cursor.execute("ANALYZE notifications_notification")


def claim_plan(**claim_args: Any) -> dict:
    _, sql, params = claim_statement(DUE, now=NOW, lease=LEASE, limit=LIMIT, **claim_args)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        (document,) = cursor.fetchone()
    return (json.loads(document) if isinstance(document, str) else document)[0]["Plan"]


def test_a_claim_100000_rows_deep_sorts_and_reads_only_a_few_rows_of_each_tenant():
    fill_deep_backlog(tenants=200, endpoints=2000)

    nodes = plan_nodes(claim_plan(cap=4))

    sorted_rows = [node["Actual Rows"] for node in nodes if "Sort" in node["Node Type"]]
    assert max(sorted_rows) <= 400  # the candidates: a share of each of 200 tenants
    assert max(node["Actual Rows"] * node["Actual Loops"] for node in nodes) <= 1_000
    assert not any(node["Node Type"] == "Seq Scan" for node in nodes)


def test_a_claim_100000_rows_deep_before_statistics_caught_up_reads_only_a_few_rows():
    # A fan-out published moments ago: the planner believes the table holds next to
    # nothing. Which tenants have a ready row is still asked of each tenant's first rows,
    # not answered by reading every ready row.
    forget_the_table_size()
    fill_deep_backlog(tenants=200, endpoints=2000, analyze=False)

    nodes = plan_nodes(claim_plan(cap=4))

    assert max(node["Actual Rows"] * node["Actual Loops"] for node in nodes) <= 1_000


def test_a_claim_100000_rows_deep_takes_every_tenants_first_row_first():
    fill_deep_backlog(tenants=200, endpoints=2000)
    firsts = (
        Notification.objects.order_by("tenant_id", "next_fire_at", "id")
        .distinct("tenant_id")
        .values_list("next_fire_at", "id")
    )

    taken = claim(DUE, now=NOW, lease=LEASE, limit=LIMIT, cap=4)

    # The 16 oldest first rows of their tenants, before any tenant's second.
    assert {row.pk for row in taken} == {pk for _, pk in sorted(firsts)[:LIMIT]}


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


def test_a_burst_of_jobs_claimed_before_statistics_caught_up_locks_by_key_in_rank_order():
    # 3,000 Django tasks enqueued moments ago, on a table the planner believes all but empty.
    # The batch is locked by looking up the ranked keys one by one: no step of the lock
    # reads every due job or joins the ranking to itself.
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE jobs_job CASCADE")
    due = seconds_ago(60)
    Job.objects.bulk_create(
        Job(
            kind=TASK_KIND,
            payload={"task": "tests.jobs.task_functions.add", "args": [], "kwargs": {}},
            max_attempts=3,
            next_attempt_at=due + timedelta(milliseconds=n),
            created_at=due,
            updated_at=due,
        )
        for n in range(BACKLOG)
    )
    oldest = list(Job.objects.order_by("next_attempt_at").values_list("pk", flat=True)[:LIMIT])
    _, sql, params = claim_statement(JOB_CLAIM, now=NOW, lease=LEASE, limit=LIMIT)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        (document,) = cursor.fetchone()
    plan = (json.loads(document) if isinstance(document, str) else document)[0]["Plan"]
    (lock,) = [node for node in plan_nodes(plan) if node["Node Type"] == "LockRows"]

    assert max(node["Actual Rows"] * node["Actual Loops"] for node in plan_nodes(lock)) <= (
        OVERSAMPLE * LIMIT
    )
    # EXPLAIN ANALYZE ran the claim: it took the oldest jobs.
    claimed = Job.objects.filter(claim_token=1).values_list("pk", flat=True)
    assert set(claimed) == set(oldest)


def fill_tasks(count: int, *, due: datetime) -> None:
    """`count` ready Django task jobs (no tenant), one millisecond apart, then fresh
    statistics."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO jobs_job (
                id, kind, payload, status, attempts, max_attempts, next_attempt_at,
                claim_token, last_error_category, last_error, created_at, updated_at,
                attempt_history, priority, queue_name)
            SELECT gen_random_uuid(), %(kind)s, '{"task": "t", "args": [], "kwargs": {}}',
                   'pending', 0, 3, %(due)s + make_interval(secs => n / 1000.0), 0, '', '',
                   %(due)s, %(due)s, '[]', 0, 'default'
            FROM generate_series(0, %(count)s - 1) AS n
            """,
            {"kind": TASK_KIND, "due": due, "count": count},
        )
        cursor.execute("ANALYZE jobs_job")


def job_claim_plan() -> dict:
    _, sql, params = claim_statement(JOB_CLAIM, now=NOW, lease=LEASE, limit=LIMIT)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        (document,) = cursor.fetchone()
    return (json.loads(document) if isinstance(document, str) else document)[0]["Plan"]


def test_a_job_claim_100000_tasks_deep_reads_only_the_few_it_ranks():
    fill_tasks(DEEP, due=seconds_ago(3600))

    nodes = plan_nodes(job_claim_plan())

    # Rows a node read: those it passed on and those its filter threw away.
    read = [
        (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
        for node in nodes
    ]
    assert max(read) <= OVERSAMPLE * LIMIT


def test_a_tenants_one_job_is_claimed_first_behind_100000_tasks():
    fill_tasks(DEEP, due=seconds_ago(3600))
    tenant = make_tenant()
    job = Job.objects.create(
        tenant=tenant,
        kind="provision",
        payload={},
        max_attempts=3,
        next_attempt_at=seconds_ago(10),
        created_at=NOW,
        updated_at=NOW,
    )

    taken = claim(JOB_CLAIM, now=NOW, lease=LEASE, limit=2)

    # The oldest task and the tenant's job: each group's first before any group's second.
    assert job.pk in {row.pk for row in taken}
    assert {row.tenant_id for row in taken} == {None, tenant.pk}
