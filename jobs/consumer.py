"""The engine of `consume_jobs`: claim ready jobs, run them, record fenced outcomes.

Jobs are claimed one at a time, right before they run, so each lease starts when that job's
work starts. A claim counts the attempt; a job whose claims used up its attempts without
ever producing an outcome (it kills its worker) is dead-lettered as `crashed` instead of
being run again. The `Worker` repeats batches until told to stop: it polls, and on
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

import psycopg
from django.conf import settings
from django.db import (
    DEFAULT_DB_ALIAS,
    DatabaseError,
    close_old_connections,
    connection,
    connections,
)

from dbqueue.claims import ClaimSpec, claim
from dbqueue.clock import Clock
from dbqueue.database import connection_lost
from dbqueue.totals import WorkerSummary
from jobs.handlers import JobError, handler_for
from jobs.models import ErrorCategory, Job
from jobs.services import Outcome, job_complete, job_crashed, job_fail

logger = logging.getLogger(__name__)

NOTIFY_CHANNEL = "tickwork_jobs"
# How often a waiting worker looks at its stop flag.
_STOP_CHECK_SECONDS = 0.5

JOB_CLAIM = ClaimSpec(
    model=Job,
    ready_sql=(
        "status IN ('pending', 'enqueued') AND next_attempt_at <= %(now)s"
        " AND (claimed_until IS NULL OR claimed_until < %(now)s)"
    ),
    order_by="next_attempt_at",
    # While enqueued, next_attempt_at is the lease expiry: job_ready_idx then serves both
    # due pending jobs and orphaned enqueued ones.
    extra_assignments=(
        "status = 'enqueued', attempts = attempts + 1, next_attempt_at = %(lease_until)s,"
        " last_attempt_at = %(now)s, updated_at = %(now)s"
    ),
)


def jobs_claim(*, now: datetime, limit: int) -> list[Job]:
    """Claim up to `limit` ready jobs (one statement): pending and due, or enqueued with an
    expired lease (orphaned). Each returned job carries its new claim token and counts
    the attempt."""
    lease = timedelta(seconds=settings.JOB_LEASE_SECONDS)
    return claim(JOB_CLAIM, now=now, lease=lease, limit=limit, params={})


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
    claimed, `max_seconds` passed or `should_stop()`; the job in flight always finishes."""
    summary = BatchSummary()
    started = time.monotonic()
    while summary.claimed < limit and time.monotonic() - started < max_seconds:
        if should_stop():
            break
        claimed = jobs_claim(now=clock.now(), limit=1)
        if not claimed:
            break
        summary.claimed += 1
        summary.count(job_process(claimed[0], clock=clock))
    summary.duration = time.monotonic() - started
    if summary.claimed:
        # Idle polls of --loop are not batches: counting them would write every interval.
        summary.add_to_totals(now=clock.now())
    return summary


class Worker:
    """Runs batches until `stop()`: after each batch it waits up to `interval` seconds,
    or less when PostgreSQL notifies that a job was committed. `notified_wakeups` and
    `timed_wakeups` count how each wait ended."""

    def __init__(
        self, *, limit: int, max_seconds: float, interval: float, report: Callable[[str], None]
    ) -> None:
        self.limit = limit
        self.max_seconds = max_seconds
        self.interval = interval
        self.report = report
        self.notified_wakeups = 0
        self.timed_wakeups = 0
        self.idle = threading.Event()  # set while waiting between batches
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self) -> None:
        # Listen before the first batch, so no job committed after a batch's last claim
        # can go unnoticed until the next poll.
        waiter = _ListenWaiter() if connection.vendor == "postgresql" else _PollWaiter()
        try:
            waiter.open()
            while not self._stop.is_set():
                self._batch()
                self.idle.set()
                woken = waiter.wait(self.interval, self._stop)
                self.idle.clear()
                if woken:
                    self.notified_wakeups += 1
                elif not self._stop.is_set():
                    self.timed_wakeups += 1
        finally:
            waiter.close()

    def _batch(self) -> None:
        try:
            summary = jobs_drain(
                clock=Clock(),
                limit=self.limit,
                max_seconds=self.max_seconds,
                should_stop=self._stop.is_set,
            )
        except DatabaseError:
            logger.exception("consume_jobs: batch failed; trying again after the interval")
            return
        finally:
            close_old_connections()
        if summary.claimed:
            self.report(summary.line())


class _PollWaiter:
    def open(self) -> None:
        pass

    def wait(self, timeout: float, stop: threading.Event) -> bool:
        stop.wait(timeout)
        return False

    def close(self) -> None:
        pass


class _ListenWaiter:
    """LISTEN on a dedicated connection; a lost connection degrades to polling until it
    can be opened again."""

    def __init__(self) -> None:
        self._db = None

    def wait(self, timeout: float, stop: threading.Event) -> bool:
        deadline = time.monotonic() + timeout
        while not stop.is_set() and (remaining := deadline - time.monotonic()) > 0:
            slice_seconds = min(remaining, _STOP_CHECK_SECONDS)
            try:
                raw = self.open()
                if list(raw.notifies(timeout=slice_seconds, stop_after=1)):
                    list(raw.notifies(timeout=0))  # one batch serves the whole burst
                    return True
            except (DatabaseError, psycopg.Error):
                logger.warning("consume_jobs: LISTEN connection lost; polling meanwhile")
                self.close()
                stop.wait(slice_seconds)
        return False

    def open(self) -> "psycopg.Connection":
        """The listening connection, opened (and LISTENing) if it is not already."""
        if self._db is None:
            self._db = connections.create_connection(DEFAULT_DB_ALIAS)
            self._db.ensure_connection()
            self._db.connection.execute(f"LISTEN {NOTIFY_CHANNEL}")
        return self._db.connection

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
