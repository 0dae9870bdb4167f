"""On PostgreSQL: concurrent consumers share the outbox without running a job twice, and a
waiting worker wakes on the jobs table's NOTIFY instead of its poll interval — when
DATABASE_LISTEN_URL gives it a direct connection to LISTEN on; without it, it polls."""

import time
from collections import Counter

import pytest
from django.db import connection
from django.utils import timezone

from dbqueue.clock import Clock
from dbqueue.listen import LISTEN_DB_ALIAS
from jobs.consumer import BatchSummary, jobs_drain, jobs_worker
from jobs.models import Job, JobStatus
from tests.conftest import requires_postgres
from tests.jobs.factories import make_job
from tests.support.concurrency import Threads, run_together
from tests.support.http_server import Reply, recording_server

CONSUMERS = 4
JOBS = 40


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_consumers_complete_every_job_exactly_once(alice, settings):
    settings.JOB_LEASE_SECONDS = 60
    jobs = {str(make_job(alice.tenant, now=timezone.now()).id) for _ in range(JOBS)}

    def consume() -> BatchSummary:
        return jobs_drain(clock=Clock(), limit=JOBS, max_seconds=60)

    with recording_server(lambda request: Reply(200, delay=0.01)) as server:
        settings.PROVISIONING_URL = server.url
        summaries = run_together([consume] * CONSUMERS, timeout=120)
        keys = Counter(r.headers["idempotency-key"] for r in server.received())

    assert set(keys) == jobs
    assert max(keys.values()) == 1  # no job's handler ran twice
    assert sum(s.completed for s in summaries) == JOBS
    assert sum(s.fenced_out for s in summaries) == 0
    assert set(Job.objects.values_list("status", "attempts")) == {(JobStatus.COMPLETED, 1)}


@requires_postgres
@pytest.mark.django_db(transaction=True, databases=["default", LISTEN_DB_ALIAS])
def test_a_waiting_worker_wakes_on_notify_long_before_its_poll_interval(alice, settings):
    settings.PROVISIONING_URL = ""
    settings.DATABASE_LISTEN_URL = "postgres://…"  # tests/conftest.py made the alias
    lines: list[str] = []
    worker = jobs_worker(
        limit=10, max_seconds=30, interval=3600, report=lines.append, report_error=lines.append
    )
    loop = Threads([worker.run_loop]).start()
    try:
        assert worker.idle.wait(30)  # the first (empty) batch is done; it now waits
        job = make_job(alice.tenant, now=timezone.now())
        for _ in range(300):
            if Job.objects.get(pk=job.pk).status == JobStatus.COMPLETED:
                break
            time.sleep(0.1)
        time.sleep(1.0)  # room for a spurious wake-up from the claim or the completion
    finally:
        worker.stop()
        loop.join(30)

    assert Job.objects.get(pk=job.pk).status == JobStatus.COMPLETED
    assert worker.timed_wakeups == 0  # the one-hour poll never came round
    # Only the new pending job notifies: the claim and the completion do not.
    assert worker.notified_wakeups == 1
    assert lines[0].startswith("event=consume_jobs claimed=1 completed=1")


def listening_sessions() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN %%' "
            "AND datname = current_database()"
        )
        return cursor.fetchone()[0]


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_without_a_listen_url_the_worker_polls_and_never_listens(alice, settings):
    settings.PROVISIONING_URL = ""
    settings.DATABASE_LISTEN_URL = ""
    lines: list[str] = []
    worker = jobs_worker(
        limit=10, max_seconds=30, interval=0.2, report=lines.append, report_error=lines.append
    )
    loop = Threads([worker.run_loop]).start()
    try:
        assert worker.idle.wait(30)
        job = make_job(alice.tenant, now=timezone.now())
        for _ in range(300):
            if Job.objects.get(pk=job.pk).status == JobStatus.COMPLETED:
                break
            time.sleep(0.1)
        sessions = listening_sessions()
    finally:
        worker.stop()
        loop.join(30)

    assert Job.objects.get(pk=job.pk).status == JobStatus.COMPLETED
    assert worker.notified_wakeups == 0
    assert worker.timed_wakeups >= 1  # the poll found the job
    assert sessions == 0
