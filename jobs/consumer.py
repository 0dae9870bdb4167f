"""The engine of `consume_jobs`: claim ready jobs, run them, record fenced outcomes.

Jobs are claimed one at a time, right before they run, so each lease starts when that job's
work starts. A claim counts the attempt; a job whose claims used up its attempts without
ever producing an outcome (it kills its worker) is dead-lettered as `crashed` instead of
being run again. `jobs_worker` repeats batches until told to stop: it polls, and on
PostgreSQL it also wakes on the `tickwork_jobs` notification that the jobs table's trigger
sends when a job is committed.
"""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import ClassVar

from django.conf import settings
from django.db import DatabaseError, connection

from dbqueue.claims import ClaimSpec, ClaimValue, claim
from dbqueue.clock import Clock
from dbqueue.database import connection_lost
from dbqueue.listen import ListenWaiter
from dbqueue.totals import WorkerSummary
from dbqueue.worker import ConnectionLost, Worker
from jobs.models import ErrorCategory, Job, JobStatus
from jobs.registry import JobError, handler_for
from jobs.services import Outcome, job_complete, job_crashed, job_defer, job_fail

logger = logging.getLogger(__name__)

NOTIFY_CHANNEL = "tickwork_jobs"

JOB_CLAIM = ClaimSpec(
    ready=lambda now: Job.objects.ready(now=now),
    order_by=("next_attempt_at",),
    fair_by="tenant",
    # While enqueued, next_attempt_at is the lease expiry: job_ready_idx then serves both
    # due pending jobs and orphaned enqueued ones.
    on_claim={
        "status": JobStatus.ENQUEUED,
        "attempts": ClaimValue.INCREMENT,
        "next_attempt_at": ClaimValue.LEASE_UNTIL,
        "last_attempt_at": ClaimValue.NOW,
        "updated_at": ClaimValue.NOW,
    },
)


def jobs_claim(*, now: datetime, limit: int) -> list[Job]:
    """Claim up to `limit` ready jobs (one statement): pending and due, or enqueued with an
    expired lease (orphaned). Each returned job carries its new claim token and counts
    the attempt."""
    lease = timedelta(seconds=settings.JOB_LEASE_SECONDS)
    return claim(JOB_CLAIM, now=now, lease=lease, limit=limit)


def job_process(job: Job, *, clock: Clock) -> Outcome:
    """Run one claimed job through its handler and record the outcome, fenced on the
    job's claim token. A handler's failure is recorded, never raised; a lost database
    connection is raised."""
    if job.attempts > job.max_attempts:
        return _checked(job, "crashed", job_crashed(job=job, now=clock.now()))
    handler = handler_for(job.kind)
    if handler is None:
        outcome = job_fail(
            job=job,
            now=clock.now(),
            category=ErrorCategory.UNKNOWN_KIND,
            error=f"no handler for job kind {job.kind!r}",
            permanent=True,
        )
        return _checked(job, "unknown_kind", outcome)
    try:
        handler.perform(job)
        now = clock.now()
        done = job_complete(job=job, now=now, apply=lambda: handler.apply(job, now=now))
    except JobError as exc:
        if exc.backpressure:
            deferral = job_defer(
                job=job, now=clock.now(), error=str(exc), retry_after=exc.retry_after
            )
            return _checked(job, "deferral", deferral)
        outcome = job_fail(
            job=job,
            now=clock.now(),
            category=exc.category,
            error=str(exc),
            permanent=exc.permanent,
            retry_after=exc.retry_after,
        )
        return _checked(job, "failure", outcome)
    except Exception as exc:
        if isinstance(exc, DatabaseError) and connection_lost(exc):
            # The job did not fail, the database went away: record nothing (no "internal
            # error", no backoff); the job is reclaimed when its lease expires.
            raise
        logger.exception("job %s (%s) raised %s", job.id, job.kind, type(exc).__name__)
        outcome = job_fail(
            job=job,
            now=clock.now(),
            category=ErrorCategory.INTERNAL,
            error=f"internal error: {type(exc).__name__}",
        )
        return _checked(job, "failure", outcome)
    return _checked(job, "success", Outcome.COMPLETED if done else Outcome.FENCED_OUT)


def _checked(job: Job, branch: str, outcome: Outcome) -> Outcome:
    if outcome is Outcome.FENCED_OUT:
        logger.warning(
            "fenced out on %s for job %s, claim_token=%s", branch, job.id, job.claim_token
        )
    return outcome


@dataclass
class BatchSummary(WorkerSummary):
    claimed: int = 0
    completed: int = 0
    retried: int = 0
    deferred: int = 0
    failed: int = 0
    fenced_out: int = 0
    duration: float = 0.0

    worker: ClassVar[str] = "consume_jobs"

    def count(self, outcome: Outcome) -> None:
        setattr(self, outcome.value, getattr(self, outcome.value) + 1)


def jobs_drain(
    *,
    clock: Clock,
    limit: int,
    max_seconds: float,
    should_stop: Callable[[], bool] = lambda: False,
) -> BatchSummary:
    """One bounded batch: claim and run jobs until none is ready, `limit` jobs were
    claimed, `max_seconds` passed or `should_stop()`; the job in flight always finishes.
    Raises ConnectionLost (with the batch's summary) when the database connection is lost:
    the job in flight is then left to its lease."""
    summary = BatchSummary()
    started = time.monotonic()
    try:
        while summary.claimed < limit and time.monotonic() - started < max_seconds:
            if should_stop():
                break
            claimed = jobs_claim(now=clock.now(), limit=1)
            if not claimed:
                break
            summary.claimed += 1
            summary.count(job_process(claimed[0], clock=clock))
    except DatabaseError as exc:
        if not connection_lost(exc):
            raise
        summary.duration = time.monotonic() - started
        raise ConnectionLost(summary) from exc
    summary.duration = time.monotonic() - started
    if summary.claimed:
        # Idle polls of --loop are not batches: counting them would write every interval.
        summary.add_to_totals(now=clock.now())
    return summary


def jobs_worker(
    *,
    limit: int,
    max_seconds: float,
    interval: float,
    report: Callable[[str], None],
    report_error: Callable[[str], None],
) -> Worker:
    """The consume_jobs worker: each pass is one `jobs_drain` batch on a fresh clock."""

    def batch(stop: threading.Event) -> BatchSummary:
        return jobs_drain(
            clock=Clock(), limit=limit, max_seconds=max_seconds, should_stop=stop.is_set
        )

    waiter = ListenWaiter(NOTIFY_CHANNEL) if connection.vendor == "postgresql" else None
    return Worker(
        "consume_jobs",
        batch,
        interval=interval,
        report=report,
        report_error=report_error,
        waiter=waiter,
    )
