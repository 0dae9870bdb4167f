"""Running a claimed batch of jobs and recording each outcome, fenced by its claim token.

Before each job starts, the batch's lease must still cover that job's worst case
(`Handler.max_seconds`); when it does not, or the worker is stopping, the jobs not yet
started are released (pending again, attempt given back). Successes are written back
together at the end of the batch, in one fenced statement and one transaction with the
handlers' local writes (`apply_many` where a handler has it); if that transaction fails,
each job is written back alone so that one bad job cannot fail the others. Failures are
written back at once, one by one; the successes before a task (a job that works in many
steps, see `jobs.registry.Handler`) are written back before it starts. A job whose claims
used up its attempts without ever producing an outcome (it kills its worker) is
dead-lettered as `crashed` instead of being run again.
"""

import logging
from collections.abc import Callable
from datetime import timedelta

from django.db import DatabaseError

from dbqueue.clock import Clock
from dbqueue.database import connection_lost
from dbqueue.leases import is_lease_running
from jobs.models import Job
from jobs.registry import Handler, JobError, handler_for
from jobs.services import (
    Outcome,
    job_complete,
    job_crashed,
    job_defer,
    job_fail,
    jobs_complete,
    jobs_release,
    recorded,
)
from jobs.states import Move
from outbound.categories import ErrorCategory

# The consumer's one logger, whichever of its modules logs.
logger = logging.getLogger("jobs.consumer")


def _refused(job: Job, handler: Handler | None, *, clock: Clock) -> Outcome | None:
    """The outcome of a job that must not run (one that crashed its worker on every
    attempt, an unknown kind), else None."""
    if job.attempts > job.max_attempts:
        return job_crashed(job=job, now=clock.now())
    if handler is None:
        return job_fail(
            job=job,
            now=clock.now(),
            category=ErrorCategory.UNKNOWN_KIND,
            error=f"no handler for job kind {job.kind!r}",
            permanent=True,
        )
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
    return recorded(job, Move.COMPLETE, done, Outcome.COMPLETED)


def _failed(job: Job, exc: Exception, *, clock: Clock) -> Outcome:
    if isinstance(exc, JobError) and exc.backpressure:
        return job_defer(job=job, now=clock.now(), error=str(exc), retry_after=exc.retry_after)
    if isinstance(exc, JobError):
        return job_fail(
            job=job,
            now=clock.now(),
            category=exc.category,
            error=str(exc),
            permanent=exc.permanent,
            retry_after=exc.retry_after,
            exception=exc.exception,
        )
    if isinstance(exc, DatabaseError) and connection_lost(exc):
        # The job did not fail, the database went away: record nothing (no "internal
        # error", no backoff); the job is reclaimed when its lease expires.
        raise exc
    logger.error("job %s (%s) raised %s", job.id, job.kind, type(exc).__name__, exc_info=exc)
    return job_fail(
        job=job,
        now=clock.now(),
        category=ErrorCategory.INTERNAL,
        error=f"internal error: {type(exc).__name__}",
    )


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
        if handler is not None and handler.task and performed:
            # A task runs step after step, renewing only its own lease: the jobs performed
            # before it are written back first rather than wait for it under theirs.
            outcomes += _completed_together(performed, clock=clock)
            performed = []
        outcome = _refused(job, handler, clock=clock)
        if outcome is None and handler is not None:  # a job without a handler is refused
            outcome = _performed(job, handler, clock=clock)
            if outcome is None:
                performed.append((job, handler))
        if outcome is not None:
            outcomes.append(outcome)
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
    return [recorded(job, Move.COMPLETE, job.pk in done, Outcome.COMPLETED) for job in jobs]
