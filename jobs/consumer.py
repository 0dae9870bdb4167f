"""The engine of `consume_jobs`: claim ready jobs, run them, record fenced outcomes.

Jobs are claimed in small batches, each job's claim counting its attempt. A batch shares one
lease, so it is only as large as the lease covers: `claim_size()` jobs, where that many
times the slowest registered handler's worst case (`Handler.max_seconds`) fits in
JOB_LEASE_SECONDS (one at a time when a handler's worst case is unknown). Before each job
starts, the lease must still cover that job's worst case; when it does not, or the worker
is stopping, the jobs not yet started are released (pending again, attempt given back).
Successes are written back together at the end of the batch, in one fenced statement and
one transaction with the handlers' local writes (`apply_many` where a handler has it); if
that transaction fails, each job is written back alone so that one bad job cannot fail the
others. Failures are written back at once, one by one. A job whose claims used up its
attempts without ever producing an outcome (it kills its worker) is dead-lettered as
`crashed` instead of being run again. `jobs_worker` repeats batches until told to stop: it
polls, and on PostgreSQL it also wakes on the `tickwork_jobs` notification that the jobs
table's trigger sends when a job is committed.
"""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import ClassVar

from django.conf import settings
from django.db import DatabaseError

from dbqueue.claims import Claimed, ClaimSpec, ClaimValue, claim
from dbqueue.clock import Clock
from dbqueue.database import connection_lost
from dbqueue.leases import is_lease_running
from dbqueue.listen import ListenWaiter
from dbqueue.totals import WorkerSummary
from dbqueue.worker import ConnectionLost, Worker
from jobs.models import Job, JobStatus
from jobs.registry import Handler, JobError, handler_for, handlers
from jobs.services import (
    Outcome,
    job_complete,
    job_crashed,
    job_defer,
    job_fail,
    jobs_complete,
    jobs_release,
)
from outbound.categories import ErrorCategory

logger = logging.getLogger(__name__)

NOTIFY_CHANNEL = "tickwork_jobs"
# Beyond this a batch's OR-list of fenced (id, token) pairs stops paying for itself.
CLAIM_MAX = 100

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


def jobs_claim(*, now: datetime, limit: int) -> Claimed:
    """Claim up to `limit` ready jobs (one statement): pending and due, or enqueued with an
    expired lease (orphaned). Each returned job carries its new claim token and counts
    the attempt."""
    lease = timedelta(seconds=settings.JOB_LEASE_SECONDS)
    return claim(JOB_CLAIM, now=now, lease=lease, limit=limit)


def _refused(job: Job, handler: Handler | None, *, clock: Clock) -> Outcome | None:
    """The outcome of a job that must not run (a poison job, an unknown kind), else None."""
    if job.attempts > job.max_attempts:
        return _checked(job, ErrorCategory.CRASHED, job_crashed(job=job, now=clock.now()))
    if handler is None:
        outcome = job_fail(
            job=job,
            now=clock.now(),
            category=ErrorCategory.UNKNOWN_KIND,
            error=f"no handler for job kind {job.kind!r}",
            permanent=True,
        )
        return _checked(job, ErrorCategory.UNKNOWN_KIND, outcome)
    return None


def _performed(job: Job, handler: Handler, *, clock: Clock) -> Outcome | None:
    """Run `perform`; None when it succeeded, else its recorded failure."""
    try:
        handler.perform(job)
    except Exception as exc:
        return _failed(job, exc, clock=clock)
    return None


def _completed(job: Job, handler: Handler, *, clock: Clock) -> Outcome:
    """Write back one performed job's success with its local writes."""
    try:
        now = clock.now()
        done = job_complete(job=job, now=now, apply=lambda: handler.apply(job, now=now))
    except Exception as exc:
        return _failed(job, exc, clock=clock)
    return _checked(job, "success", Outcome.COMPLETED if done else Outcome.FENCED_OUT)


def _failed(job: Job, exc: Exception, *, clock: Clock) -> Outcome:
    if isinstance(exc, JobError) and exc.backpressure:
        deferral = job_defer(job=job, now=clock.now(), error=str(exc), retry_after=exc.retry_after)
        return _checked(job, "deferral", deferral)
    if isinstance(exc, JobError):
        outcome = job_fail(
            job=job,
            now=clock.now(),
            category=exc.category,
            error=str(exc),
            permanent=exc.permanent,
            retry_after=exc.retry_after,
        )
        return _checked(job, "failure", outcome)
    if isinstance(exc, DatabaseError) and connection_lost(exc):
        # The job did not fail, the database went away: record nothing (no "internal
        # error", no backoff); the job is reclaimed when its lease expires.
        raise exc
    logger.error("job %s (%s) raised %s", job.id, job.kind, type(exc).__name__, exc_info=exc)
    outcome = job_fail(
        job=job,
        now=clock.now(),
        category=ErrorCategory.INTERNAL,
        error=f"internal error: {type(exc).__name__}",
    )
    return _checked(job, "failure", outcome)


def claim_size() -> int:
    """How many jobs one claim may take: as many as the lease covers at the slowest
    registered handler's worst case, at most CLAIM_MAX; 1 when a worst case is unknown."""
    worst = [handler.max_seconds() for handler in handlers()]
    if not worst or any(seconds is None for seconds in worst):
        return 1
    fits = int(settings.JOB_LEASE_SECONDS // max(worst))
    return max(1, min(CLAIM_MAX, fits))


def jobs_process(
    jobs: list[Job], *, clock: Clock, should_stop: Callable[[], bool]
) -> list[Outcome]:
    """Run a claimed batch in the order given and record every outcome (see the module
    docstring); the jobs not started are released and get no outcome."""
    outcomes: list[Outcome] = []
    performed: list[tuple[Job, Handler]] = []
    for index, job in enumerate(jobs):
        handler = handler_for(job.kind)
        # The first job runs whatever happens, like a job claimed alone.
        if index and (should_stop() or not _lease_covers(job, handler, clock=clock)):
            jobs_release(jobs=jobs[index:], now=clock.now())
            break
        outcome = _refused(job, handler, clock=clock) or _performed(job, handler, clock=clock)
        if outcome is not None:
            outcomes.append(outcome)
        else:
            performed.append((job, handler))
    return outcomes + _completed_together(performed, clock=clock)


def _lease_covers(job: Job, handler: Handler | None, *, clock: Clock) -> bool:
    worst = handler.max_seconds() if handler is not None else None
    # The lease must still run at the moment the job's worst case would end.
    return is_lease_running(job.claimed_until, now=clock.now() + timedelta(seconds=worst or 0))


def _completed_together(performed: list[tuple[Job, Handler]], *, clock: Clock) -> list[Outcome]:
    if not performed:
        return []
    now = clock.now()
    jobs = [job for job, _ in performed]
    by_kind = {job.kind: handler for job, handler in performed}

    def apply(ours: list[Job]) -> None:
        for kind, handler in by_kind.items():
            batch = [job for job in ours if job.kind == kind]
            if handler.apply_many is not None:
                handler.apply_many(batch, now=now)
                continue
            for job in batch:
                handler.apply(job, now=now)

    try:
        done = jobs_complete(jobs=jobs, now=now, apply=apply)
    except Exception as exc:
        if isinstance(exc, DatabaseError) and connection_lost(exc):
            raise
        # One job's local writes failed the batch: write each back alone, so only that
        # job records the failure.
        return [_completed(job, handler, clock=clock) for job, handler in performed]
    return [
        _checked(job, "success", Outcome.COMPLETED if job.pk in done else Outcome.FENCED_OUT)
        for job in jobs
    ]


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


def _isolate_a_later_attempt(claimed: list[Job], *, clock: Clock) -> list[Job]:
    """Keep one job that is on a later attempt and release the others. It may be the job
    that killed the last worker: run alone, it uses up no other job's attempt if it does so
    again (the rest of the pass then claims one job at a time)."""
    later = next(job for job in claimed if job.attempts > 1)
    jobs_release(jobs=[job for job in claimed if job is not later], now=clock.now())
    return [later]


def jobs_drain(
    *,
    clock: Clock,
    limit: int,
    max_seconds: float,
    should_stop: Callable[[], bool] = lambda: False,
) -> BatchSummary:
    """One bounded batch: claim and run jobs until none is ready, `limit` jobs were
    claimed, `max_seconds` passed or `should_stop()`; the job in flight always finishes
    and the claimed jobs not yet started are released.
    Raises ConnectionLost (with the batch's summary) when the database connection is lost:
    the job in flight is then left to its lease."""
    summary = BatchSummary()
    started = time.monotonic()
    size = claim_size()

    def stopping() -> bool:
        return should_stop() or time.monotonic() - started >= max_seconds

    try:
        while summary.claimed < limit and not stopping():
            claimed = jobs_claim(now=clock.now(), limit=min(size, limit - summary.claimed))
            if not claimed and claimed.drained:
                break
            if len(claimed) > 1 and any(job.attempts > 1 for job in claimed):
                claimed, size = _isolate_a_later_attempt(claimed, clock=clock), 1
            # Released jobs were given back, not run: they are not counted as claimed.
            for outcome in jobs_process(claimed, clock=clock, should_stop=stopping):
                summary.claimed += 1
                summary.count(outcome)
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

    waiter = ListenWaiter.configured(NOTIFY_CHANNEL)
    return Worker(
        "consume_jobs",
        batch,
        interval=interval,
        report=report,
        report_error=report_error,
        waiter=waiter,
    )
