"""Fair claims on PostgreSQL: the plan of the exact claim statement, and claimers on real
separate connections that overlap without claiming a row twice or leaving one behind."""

from collections import Counter
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction

from dbqueue.claims import claim_statement
from jobs.consumer import JOB_CLAIM
from jobs.models import Job
from projects.models import Project
from tests.conftest import requires_postgres
from tests.dbqueue.fair_queues import LEASE, NOW, QUEUES, seconds_ago
from tests.delivery.factories import make_tenant
from tests.support.concurrency import run_together

pytestmark = [requires_postgres]

FILLER = 20_000

# 20,000 rows the claim must not pay for: half parked or finished, half due in the future.
FILL = {
    "notifications": """
        INSERT INTO notifications_notification (
            id, tenant_id, channels, email_to, subject, body, rrule, timezone, next_fire_at,
            occurrence, error_count, max_attempts, state, dead_letter_reason, claim_token,
            unfinished_claims, channel_state, created_at, updated_at)
        SELECT gen_random_uuid(), %(tenant)s, '["webhook"]', '[]', '', '', '', 'UTC',
               CASE WHEN n %% 2 = 0 THEN NULL ELSE %(now)s + make_interval(mins => n) END,
               1, 0, 3, CASE WHEN n %% 2 = 0 THEN 'completed' ELSE 'scheduled' END,
               '', 0, 0, '{}', %(now)s, %(now)s
        FROM generate_series(1, %(count)s) AS n
    """,
    "jobs": """
        INSERT INTO jobs_job (
            id, tenant_id, project_id, kind, payload, status, attempts, max_attempts,
            next_attempt_at, claim_token, last_error, last_error_category, created_at,
            updated_at, attempt_history)
        SELECT gen_random_uuid(), %(tenant)s, %(project)s, 'provision', '{}',
               CASE WHEN n %% 2 = 0 THEN 'completed' ELSE 'pending' END, 0, 5,
               %(now)s + make_interval(mins => n), 0, '', '', %(now)s, %(now)s, '[]'
        FROM generate_series(1, %(count)s) AS n
    """,
}
INDEX = {"notifications": "notification_due_idx", "jobs": "job_ready_idx"}


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(QUEUES))
def test_the_fair_claim_plan_uses_the_ready_index_and_scans_no_table(name):
    queue = QUEUES[name]
    tenants = [make_tenant(f"t{n}") for n in range(3)]
    for tenant in tenants:
        queue.add(tenant, seconds_ago(30, 20, 10))
    project = Project.objects.create(tenant=tenants[0], name="Filler")
    params = {"tenant": tenants[0].pk, "project": project.pk, "now": NOW, "count": FILLER}
    _, sql, claim_params = claim_statement(queue.spec, now=NOW, lease=LEASE, limit=16)
    with connection.cursor() as cursor:
        cursor.execute(FILL[name], params)
        cursor.execute("ANALYZE")
        cursor.execute("EXPLAIN " + sql, claim_params)
        plan = "\n".join(row[0] for row in cursor.fetchall())

    print(plan)  # shown with -s: the ranking, then the lock, then the update
    assert INDEX[name] in plan
    assert "Seq Scan" not in plan
    assert "WindowAgg" in plan  # the ranking across tenants…
    assert "LockRows" in plan  # …then the lock, which SKIP LOCKED rows do not limit


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("name", sorted(QUEUES))
def test_overlapping_claimers_take_every_row_exactly_once(name):
    queue = QUEUES[name]
    rows = []
    for n, count in enumerate((120, 60, 20)):
        rows += queue.add(make_tenant(f"t{n}"), seconds_ago(*range(count, 0, -1)))

    def claimer() -> list[Any]:
        mine: list[Any] = []
        while True:
            # Hold the claimed rows' locks a moment, so the other claimer meets them.
            with transaction.atomic():
                batch = queue.claim(16, now=NOW + timedelta(seconds=1))
                connection.cursor().execute("SELECT pg_sleep(0.01)")
            if not batch:
                return mine
            mine.extend(batch)

    claimed = run_together([claimer, claimer], timeout=120)

    counts = Counter(claimed[0] + claimed[1])
    assert set(counts) == set(rows)
    assert max(counts.values()) == 1
    assert all(claimed), "both claimers took rows"


@pytest.mark.django_db
def test_a_ready_queryset_that_joins_another_table_is_refused():
    # The lock re-applies the ready predicate to the claimed table alone.
    joining = replace(
        JOB_CLAIM, ready=lambda now: Job.objects.ready(now=now).filter(project__name="Import")
    )

    with pytest.raises(ValueError, match="must not join"):
        claim_statement(joining, now=NOW, lease=LEASE, limit=1)
