"""Claim semantics of the jobs outbox: due pending jobs and orphaned running ones."""

from datetime import timedelta

import pytest
from django.db import connection

from dbqueue.claims import claim_statement
from jobs.consumer import JOB_CLAIM, jobs_claim
from jobs.models import Job, JobStatus
from tests.conftest import requires_postgres
from tests.jobs.factories import NOW, make_job, reload

LEASE = timedelta(seconds=60)


@pytest.fixture(autouse=True)
def _lease(settings):
    settings.JOB_LEASE_SECONDS = 60


def test_a_due_pending_job_is_claimed_and_the_claim_counts_the_attempt(alice):
    job = make_job(alice.tenant)

    [claimed] = jobs_claim(now=NOW, limit=10)

    assert claimed.pk == job.pk
    assert claimed.claim_token == 1
    stored = reload(job)
    assert stored.status == JobStatus.RUNNING
    assert stored.attempts == 1
    assert stored.claim_token == 1
    assert stored.claimed_until == NOW + LEASE
    assert stored.next_attempt_at == NOW + LEASE
    assert stored.last_attempt_at == NOW


def test_a_job_not_yet_due_is_not_claimed(alice):
    job = make_job(alice.tenant, next_attempt_at=NOW + timedelta(seconds=1))

    assert jobs_claim(now=NOW, limit=10) == []
    assert reload(job).status == JobStatus.PENDING
    assert reload(job).attempts == 0


def test_a_running_job_is_not_reclaimed_while_its_lease_runs(alice):
    job = make_job(alice.tenant)
    jobs_claim(now=NOW, limit=10)

    assert jobs_claim(now=NOW + timedelta(seconds=30), limit=10) == []
    assert jobs_claim(now=NOW + LEASE, limit=10) == []
    assert reload(job).claim_token == 1


def test_an_orphaned_running_job_is_reclaimed_after_its_lease_expired(alice):
    job = make_job(alice.tenant)
    jobs_claim(now=NOW, limit=10)
    later = NOW + LEASE + timedelta(seconds=1)

    [reclaimed] = jobs_claim(now=later, limit=10)

    assert reclaimed.pk == job.pk
    assert reclaimed.claim_token == 2
    stored = reload(job)
    assert stored.attempts == 2
    assert stored.claimed_until == later + LEASE


@pytest.mark.parametrize("status", [JobStatus.COMPLETED, JobStatus.DEAD_LETTERED])
def test_finished_jobs_are_never_claimed(alice, status):
    make_job(alice.tenant, status=status)

    assert jobs_claim(now=NOW + timedelta(days=1), limit=10) == []


def test_the_oldest_due_jobs_are_claimed_first_up_to_the_limit(alice):
    old = make_job(alice.tenant, next_attempt_at=NOW - timedelta(minutes=5))
    middle = make_job(alice.tenant, next_attempt_at=NOW - timedelta(minutes=1))
    make_job(alice.tenant, next_attempt_at=NOW)

    claimed = jobs_claim(now=NOW, limit=2)

    assert {job.pk for job in claimed} == {old.pk, middle.pk}


def test_claiming_a_batch_is_one_statement(alice, django_assert_num_queries):
    for _ in range(3):
        make_job(alice.tenant)

    with django_assert_num_queries(1):
        claimed = jobs_claim(now=NOW, limit=5)

    assert len(claimed) == 3
    assert all(job.status == JobStatus.RUNNING for job in claimed)


@requires_postgres
def test_the_claim_is_served_by_the_partial_index_of_ready_jobs_by_tenant(alice):
    make_job(alice.tenant)
    _, sql, params = claim_statement(JOB_CLAIM, now=NOW, lease=timedelta(seconds=60), limit=10)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())

    assert "job_tenant_ready_idx" in plan


@requires_postgres
def test_the_prune_is_served_by_the_partial_completed_index(alice):
    make_job(alice.tenant, status=JobStatus.COMPLETED, completed_at=NOW, next_attempt_at=None)
    finished = Job.objects.filter(status=JobStatus.COMPLETED, completed_at__lt=NOW)
    sql, params = finished.values("pk").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())

    assert "job_completed_idx" in plan


@requires_postgres
def test_a_claim_writes_five_indexes_and_a_completion_four(alice):
    # Each non-HOT update writes every index whose predicate its new row satisfies: a claim
    # the three unconditional ones and the two ready ones (job_tenant_ready_idx, which the
    # PostgreSQL claim walks tenant by tenant), a completion the three and the completed one.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexrelid::regclass::text, pg_get_expr(indpred, indrelid) "
            "FROM pg_index WHERE indrelid = 'jobs_job'::regclass"
        )
        indexes = dict(cursor.fetchall())

    unconditional = sorted(name for name, predicate in indexes.items() if predicate is None)
    assert len(unconditional) == 3  # the primary key, the project, tenant+status+created
    assert "job_tenant_status_idx" in unconditional
    assert sorted(name for name, predicate in indexes.items() if predicate) == [
        "job_completed_idx",
        "job_ready_idx",
        "job_tenant_ready_idx",
    ]
