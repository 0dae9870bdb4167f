"""On PostgreSQL: concurrent consumers share the outbox without running a job twice, and a
waiting worker wakes on the jobs table's NOTIFY instead of its poll interval."""

import threading
import time
from collections import Counter

import pytest
from django.db import connection
from django.utils import timezone

from dbqueue.clock import Clock
from jobs.consumer import BatchSummary, jobs_drain, jobs_worker
from jobs.models import Job, JobStatus
from tests.conftest import requires_postgres
from tests.jobs.factories import make_job
from tests.support.http_server import Reply, recording_server

CONSUMERS = 4
JOBS = 40


def in_thread(target, *args) -> threading.Thread:
    def run() -> None:
        try:
            target(*args)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_consumers_complete_every_job_exactly_once(alice, settings):
    settings.JOB_LEASE_SECONDS = 60
    jobs = {str(make_job(alice.tenant, now=timezone.now()).id) for _ in range(JOBS)}
    summaries: list[BatchSummary] = []
    start = threading.Barrier(CONSUMERS)

    def consume() -> None:
        start.wait()
        summaries.append(jobs_drain(clock=Clock(), limit=JOBS, max_seconds=60))

    with recording_server(lambda request: Reply(200, delay=0.01)) as server:
        settings.PROVISIONING_URL = server.url
        for thread in [in_thread(consume) for _ in range(CONSUMERS)]:
            thread.join(120)
        keys = Counter(r.headers["idempotency-key"] for r in server.received())

    assert set(keys) == jobs
    assert max(keys.values()) == 1  # no job's handler ran twice
    assert sum(s.completed for s in summaries) == JOBS
    assert sum(s.fenced_out for s in summaries) == 0
    assert set(Job.objects.values_list("status", "attempts")) == {(JobStatus.COMPLETED, 1)}


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_a_waiting_worker_wakes_on_notify_long_before_its_poll_interval(alice, settings):
    settings.PROVISIONING_URL = ""
    lines: list[str] = []
    worker = jobs_worker(
        limit=10, max_seconds=30, interval=3600, report=lines.append, report_error=lines.append
    )
    thread = in_thread(worker.run_loop)
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
        thread.join(30)

    assert Job.objects.get(pk=job.pk).status == JobStatus.COMPLETED
    assert worker.timed_wakeups == 0  # the one-hour poll never came round
    # Only the new pending job notifies: the claim and the completion do not.
    assert worker.notified_wakeups == 1
    assert lines[0].startswith("event=consume_jobs claimed=1 completed=1")
