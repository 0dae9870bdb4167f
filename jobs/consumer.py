"""The engine of `consume_jobs`: claim ready jobs, run them (`jobs.processing`), record
fenced outcomes.

Jobs are claimed in small batches, each job's claim counting its attempt. A batch shares one
lease, so it is only as large as the lease covers: `claim_size()` jobs, where that many
times the slowest registered handler's worst case (`Handler.max_seconds`) fits in
JOB_LEASE_SECONDS (one at a time when a handler's worst case is unknown). How a batch runs
and is written back is `jobs.processing`'s. `jobs_worker` repeats batches until told to
stop: it polls, and on PostgreSQL it also wakes on the `tickwork_jobs` notification that
the jobs table's trigger sends when a job is committed.
"""

import functools
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
from dbqueue.listen import ListenWaiter
from dbqueue.totals import WorkerSummary
from dbqueue.worker import ConnectionLost, Worker
from jobs.models import Job
from jobs.processing import jobs_process
from jobs.registry import handlers
from jobs.services import Outcome, jobs_release
from jobs.states import Move, target

NOTIFY_CHANNEL = "tickwork_jobs"
# Beyond this a batch's OR-list of fenced (id, token) pairs stops paying for itself.
CLAIM_MAX = 100

# While running, next_attempt_at is the lease expiry: job_ready_idx then serves both due
# pending jobs and orphaned running ones.
_ON_CLAIM = {
    "status": target(Move.CLAIM),
    "attempts": ClaimValue.INCREMENT,
    "next_attempt_at": ClaimValue.LEASE_UNTIL,
    "last_attempt_at": ClaimValue.NOW,
    "updated_at": ClaimValue.NOW,
}
# Higher priority first (a Django task's; every other job has 0), then the longest due.
_ORDER = ("-priority", "next_attempt_at")

JOB_CLAIM = ClaimSpec(
    ready=lambda now: Job.objects.ready(now=now),
    order_by=_ORDER,
    fair_by="tenant",
    on_claim=_ON_CLAIM,
    # job_tenant_ready_idx: a claim takes each tenant's first ready jobs from it, so it
    # costs the same 2,000 or 100,000 tasks deep.
    groups=lambda: Job.objects.claimable(),
)


@functools.cache
def queue_claim(queue_name: str) -> ClaimSpec:
    """The claim of `consume_jobs --queue NAME`: JOB_CLAIM's, of one queue's jobs."""
    return ClaimSpec(
        ready=lambda now: Job.objects.ready(now=now).filter(queue_name=queue_name),
        order_by=_ORDER,
        fair_by="tenant",
        on_claim=_ON_CLAIM,
        groups=lambda: Job.objects.claimable(),
    )


def jobs_claim(*, now: datetime, limit: int, queue_name: str | None = None) -> Claimed:
    """Claim up to `limit` ready jobs (one statement), of queue `queue_name` only when one
    is named: pending and due, or running with an expired lease (orphaned). Each returned
    job carries its new claim token and counts the attempt."""
    lease = timedelta(seconds=settings.JOB_LEASE_SECONDS)
    spec = JOB_CLAIM if queue_name is None else queue_claim(queue_name)
    return claim(spec, now=now, lease=lease, limit=limit)


def claim_size() -> int:
    """How many jobs one claim may take: as many as the lease covers at the slowest
    registered handler's worst case, at most CLAIM_MAX; 1 when a worst case is unknown."""
    worst = [handler.max_seconds() for handler in handlers()]
    known = [seconds for seconds in worst if seconds is not None]
    if not worst or len(known) < len(worst):
        return 1
    fits = int(settings.JOB_LEASE_SECONDS // max(known))
    return max(1, min(CLAIM_MAX, fits))


@dataclass
class BatchSummary(WorkerSummary):
    claimed: int = 0
    # One field per Outcome, named by its value: the vocabulary run_tick counts in too.
    completed: int = 0
    backed_off: int = 0
    deferred: int = 0
    dead_lettered: int = 0
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
    queue_name: str | None = None,
) -> BatchSummary:
    """One bounded batch (of queue `queue_name` only, when one is named): claim and run
    jobs until none is ready, `limit` jobs were claimed, `max_seconds` passed or
    `should_stop()`; the job in flight always finishes
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
            claimed = jobs_claim(
                now=clock.now(), limit=min(size, limit - summary.claimed), queue_name=queue_name
            )
            if not claimed and claimed.drained:
                break
            batch: list[Job] = claimed
            if len(batch) > 1 and any(job.attempts > 1 for job in batch):
                batch, size = _isolate_a_later_attempt(batch, clock=clock), 1
            # Released jobs were given back, not run: they are not counted as claimed.
            for outcome in jobs_process(batch, clock=clock, should_stop=stopping):
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
    queue_name: str | None = None,
) -> Worker:
    """The consume_jobs worker: each pass is one `jobs_drain` batch (of `queue_name`'s jobs
    only, when one is named) on a fresh clock."""

    def batch(stop: threading.Event) -> BatchSummary:
        return jobs_drain(
            clock=Clock(),
            limit=limit,
            max_seconds=max_seconds,
            should_stop=stop.is_set,
            queue_name=queue_name,
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
