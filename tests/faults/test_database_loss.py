"""The worker's PostgreSQL session is terminated (pg_terminate_backend) in the middle of its
work: the process stops with one clear error line and a non-zero exit, nothing is lost
(what it had claimed is reclaimable after its lease), and the next run completes it all."""

import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db.models import Max
from django.utils import timezone

from delivery.models import Delivery, Notification
from jobs.models import Job, JobStatus
from projects.models import ProjectStatus
from tests.conftest import direct_sessions_only, requires_postgres
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant
from tests.faults.workers import Finished, terminate_backends, wait_past, wait_until
from tests.jobs.factories import make_job
from tests.support.http_server import Reply, recording_server

pytestmark = [
    requires_postgres,
    direct_sessions_only,
    pytest.mark.django_db(transaction=True),
    pytest.mark.fault,
]

ROWS = 40
CONCURRENCY = 8
LEASE = 7
# One endpoint takes every row here: losing the database, not endpoint isolation, is tested.
TICK_ENV = {
    "CHANNEL_TIMEOUT_SECONDS": "2",
    "CLAIM_LEASE_SECONDS": str(LEASE),
    "TICK_CONCURRENCY": str(CONCURRENCY),
    "WEBHOOK_ENDPOINT_CONCURRENCY": str(CONCURRENCY),
}
# Long enough that the lost worker's exit and a second worker's whole start-up and run fit
# inside the lease on a busy machine: the early run must see the job still claimed.
JOB_LEASE = 20
JOBS_ENV = {"JOB_LEASE_SECONDS": str(JOB_LEASE), "PROVISIONING_TIMEOUT_SECONDS": "3"}


def assert_one_clear_error(result: Finished, command: str) -> str:
    """Non-zero exit, no traceback, and exactly one `CommandError: <command>: …` line."""
    assert result.returncode != 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.startswith("CommandError:")]
    assert line.startswith(f"CommandError: {command}: cannot reach the database"), line
    return line


def test_tick_whose_database_session_is_terminated_stops_and_loses_nothing(workers, report):
    tenant = make_tenant()
    release = threading.Event()

    def responder(request) -> Reply:
        release.wait(30)  # hold the first tick's calls until its session is gone
        return Reply(200)

    with recording_server(responder) as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        rows = make_notifications(
            ROWS, tenant=tenant, endpoint=endpoint, next_fire_at=timezone.now() - timedelta(1)
        )
        started = time.monotonic()
        broken = workers("run_tick", app="fault_db_tick_a", env=TICK_ENV)
        wait_until(lambda: len(server.received()) == CONCURRENCY, timeout=30)
        terminated = terminate_backends("fault_db_tick_a")
        release.set()
        first = broken.finish(timeout=30)

        held = Notification.objects.filter(claimed_until__isnull=False)
        held_count = held.count()
        untouched = Notification.objects.filter(claim_token=0).count()
        lease_end = held.aggregate(last=Max("claimed_until"))["last"]
        wait_past(lease_end or timezone.now(), timeout=LEASE + 10)
        second = workers("run_tick", app="fault_db_tick_b", env=TICK_ENV).finish(timeout=60)
        seconds = time.monotonic() - started
        received = Counter(r.headers["webhook-id"] for r in server.received())

    report(
        "db_loss_tick",
        rows=ROWS,
        terminated=terminated,
        exit_code=first.returncode,
        stderr_lines=len(first.stderr.splitlines()),
        first_claimed=first.summary()["claimed"],
        first_errors=first.summary()["errors"],
        held_after_loss=held_count,
        never_claimed=untouched,
        second_claimed=second.summary()["claimed"] if second.returncode == 0 else "-",
        duplicates=sum(received.values()) - len(received),
        lost=len({f"notification_{row.pk}_1" for row in rows} - received.keys()),
        first_seconds=first.seconds,
        seconds=seconds,
    )
    assert (
        terminated == 2
    )  # the tick's own session, and its claims' and write-backs' (scheduler/database_thread.py)
    assert_one_clear_error(first, "run_tick")
    # It stopped claiming: only its first batch was ever claimed, and all of it stays
    # claimed (its write-back could not land) until the lease ends.
    assert held_count == CONCURRENCY
    assert untouched == ROWS - CONCURRENCY
    # Its summary still says what it did: the rows it could not write back are errors.
    assert (first.summary()["claimed"], first.summary()["errors"]) == (CONCURRENCY, CONCURRENCY)
    assert second.returncode == 0, second.stderr
    assert second.summary()["claimed"] == ROWS
    assert received.keys() == {f"notification_{row.pk}_1" for row in rows}
    assert max(received.values()) <= 2
    assert sum(received.values()) - len(received) <= held_count
    assert set(Notification.objects.values_list("state", "next_fire_at")) == {("completed", None)}
    assert Delivery.objects.filter(outcome="delivered").count() == ROWS


def test_consumer_whose_database_session_is_terminated_stops_and_loses_nothing(
    alice, workers, report
):
    release = threading.Event()

    def responder(request) -> Reply:
        release.wait(30)  # hold the first call until the consumer's session is gone
        return Reply(200)

    job = make_job(alice.tenant, now=timezone.now())
    with recording_server(responder) as server:
        env = {**JOBS_ENV, "PROVISIONING_URL": server.url}
        started = time.monotonic()
        broken = workers("consume_jobs", "--once", app="fault_db_jobs_a", env=env)
        wait_until(lambda: len(server.received()) == 1, timeout=30)
        terminated = terminate_backends("fault_db_jobs_a")
        release.set()
        first = broken.finish(timeout=30)
        after_loss = Job.objects.select_related("project").get(pk=job.pk)

        early = workers("consume_jobs", "--once", app="fault_db_jobs_b", env=env)
        early_result = early.finish(timeout=30)
        early_done = timezone.now()
        wait_past(after_loss.claimed_until, timeout=JOB_LEASE + 10)
        second = workers("consume_jobs", "--once", app="fault_db_jobs_c", env=env)
        second_result = second.finish(timeout=30)
        seconds = time.monotonic() - started
        keys = [r.headers["idempotency-key"] for r in server.received()]

    done = Job.objects.select_related("project").get(pk=job.pk)
    report(
        "db_loss_consume",
        terminated=terminated,
        exit_code=first.returncode,
        stderr_lines=len(first.stderr.splitlines()),
        status_after_loss=after_loss.status,
        claimed_before_lease=early_result.summary("consume_jobs")["claimed"],
        calls=len(keys),
        status=done.status,
        attempts=done.attempts,
        first_seconds=first.seconds,
        seconds=seconds,
    )
    assert terminated == 1
    assert_one_clear_error(first, "consume_jobs")
    # Still claimed, reclaimable when its lease ends; not failed, not retried early.
    assert after_loss.status == JobStatus.RUNNING
    assert after_loss.attempts == 1
    assert after_loss.project.status == ProjectStatus.PROVISIONING
    assert early_result.returncode == 0, early_result.stderr
    assert early_done < after_loss.claimed_until, "the early run should end within the lease"
    assert early_result.summary("consume_jobs")["claimed"] == 0
    assert second_result.returncode == 0, second_result.stderr
    assert second_result.summary("consume_jobs")["completed"] == 1
    assert (done.status, done.attempts) == (JobStatus.COMPLETED, 2)
    assert done.project.status == ProjectStatus.ACTIVE
    # The retry repeats the call with the same idempotency key.
    assert keys == [str(job.id), str(job.id)]
