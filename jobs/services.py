"""The writes of the jobs outbox: enqueueing, fenced outcomes of a claimed job, the support
retry, pruning. Only this module writes jobs.

Every outcome of a claimed job is one short transaction conditional on the claim token the
claim returned (`dbqueue.fences.fenced_update`); `False`/`Outcome.FENCED_OUT` means the job
was reclaimed after our lease ran out, so the stale outcome changed nothing. What a job's
dead letter or retry means for its project is the projects app's business: it listens to
`job_dead_lettered` and `job_retried`, sent inside the same transaction.
"""

import logging
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.db import models, transaction

from dbqueue.backoff import retry_delay
from dbqueue.fences import fenced_update, fenced_update_many
from dbtools.compiled import insert_one, insert_together
from dbtools.instances import fresh
from jobs.models import HISTORY_LENGTH, TASK_KIND, Job
from jobs.registry import TaskException, job_dead_lettered, job_retried
from jobs.states import JobStatus, Move, after, sources, target
from outbound.categories import ErrorCategory
from outbound.redaction import safe_error_text
from tenancy.models import Tenant
from web.errors import Conflict

# The consumer's one logger, whichever of its modules logs.
logger = logging.getLogger("jobs.consumer")

_CRASHED = "The previous attempt ended without an outcome: the worker crashed or was killed."


class Outcome(StrEnum):
    """What a claimed job's write-back recorded: the worker outcome both queues count under
    one name each (`tickwork_worker_outcomes_total`), and an attempt's `outcome` in the
    job's history (`fenced_out` is never stored: that write-back wrote nothing)."""

    COMPLETED = "completed"
    BACKED_OFF = "backed_off"
    DEFERRED = "deferred"
    DEAD_LETTERED = "dead_lettered"
    FENCED_OUT = "fenced_out"


class JobNotRetryable(Conflict):
    """Only a dead-lettered job can be retried; `status` is the job's current status."""

    kind = "job-not-retryable"

    def __init__(self, status: str) -> None:
        super().__init__(f"Only a dead-lettered job can be retried; this job is {status}.")
        self.status = status


def recorded(job: Job, move: Move, written: bool, outcome: Outcome) -> Outcome:
    """`outcome` if the fenced write of `move` was `written`, else FENCED_OUT, logged with
    the move that was dropped."""
    if written:
        return outcome
    logger.warning(
        "fenced out on %s for job %s, claim_token=%s", move.value, job.id, job.claim_token
    )
    return Outcome.FENCED_OUT


def _history(
    job: Job,
    outcome: Outcome,
    *,
    category: str = "",
    error: str = "",
    exception: TaskException | None = None,
) -> list[dict[str, Any]]:
    """The claimed `job`'s attempt history with this attempt's entry added, the oldest
    dropped past HISTORY_LENGTH. Built from the history the claim returned: while the
    claim holds, no other statement writes it. A Django task's failed attempt also keeps
    what its TaskResult's `errors` show (`exception_class_path`, `traceback`)."""
    entry = {
        "at": job.last_attempt_at.isoformat() if job.last_attempt_at else None,
        "outcome": outcome.value,
        "error_category": category or None,
        "error": error or None,
    }
    if exception is not None:
        entry["exception_class_path"], entry["traceback"] = exception
    return [*job.attempt_history, entry][-HISTORY_LENGTH:]


def job_enqueue(
    *,
    tenant: Tenant,
    kind: str,
    payload: dict[str, Any],
    now: datetime,
    project_id: uuid.UUID | None = None,
    job_id: uuid.UUID | None = None,
    alongside: Sequence[models.Model] = (),
) -> Job:
    """Insert a pending job, due now, with the rows it is about: the outbox guarantee (the
    job commits with them, or not at all). Either inside the caller's transaction, or with
    the caller's new rows as `alongside`, inserted before the job all or none — one
    statement on PostgreSQL — with no transaction of the caller's."""
    job = Job(
        id=job_id or uuid.uuid4(),
        status=after(None, Move.ENQUEUE),
        tenant=tenant,
        project_id=project_id,
        kind=kind,
        payload=payload,
        max_attempts=settings.JOB_MAX_ATTEMPTS,
        next_attempt_at=now,
        created_at=now,
        updated_at=now,
    )
    insert_together([*alongside, job])
    return job


def job_enqueue_task(
    *,
    path: str,
    arguments: dict[str, Any],
    backend: str,
    queue_name: str,
    priority: int,
    now: datetime,
    run_after: datetime | None = None,
) -> Job:
    """Insert a pending Django task (`jobs.tasks`): one INSERT, in the caller's transaction
    if there is one (the outbox guarantee: rolled back, it never runs). Due at `run_after`,
    else now (kept in the payload too: the task's own, where the due time moves on each
    attempt). `arguments` is `{"args": [...], "kwargs": {...}}`, already JSON."""
    named = {"run_after": run_after.isoformat()} if run_after is not None else {}
    job = fresh(
        Job,
        id=uuid.uuid4(),
        status=after(None, Move.ENQUEUE),
        tenant_id=None,
        kind=TASK_KIND,
        payload={"task": path, "backend": backend, **arguments, **named},
        queue_name=queue_name,
        priority=priority,
        max_attempts=settings.JOB_MAX_ATTEMPTS,
        next_attempt_at=run_after or now,
        created_at=now,
        updated_at=now,
    )
    insert_one(job)
    return job


def job_complete(*, job: Job, now: datetime, apply: Callable[[], None] | None = None) -> bool:
    """Mark the claimed `job` completed and run `apply` (the handler's local writes) in the
    same transaction, so a fenced-out run applies nothing. False when fenced out."""
    with transaction.atomic():
        done = fenced_update(
            Job,
            pk=job.pk,
            token=job.claim_token,
            status=after(job.status, Move.COMPLETE),
            next_attempt_at=None,
            completed_at=now,
            updated_at=now,
            attempt_history=_history(job, Outcome.COMPLETED),
            return_value=job.return_value,
        )
        if done and apply is not None:
            apply()
    return done


def job_progress(*, job: Job, now: datetime, payload: dict[str, Any]) -> bool:
    """Record the progress of a claimed job that works in steps (a task): store `payload`
    and renew its lease, only if the claim is still ours. Called inside the transaction
    that makes the step's writes: False (fenced out) means the caller must roll the step
    back, for the job was reclaimed and the new claimant does the step again."""
    until = now + timedelta(seconds=settings.JOB_LEASE_SECONDS)
    # While enqueued, next_attempt_at is the lease expiry (see Job).
    renewed = Job.objects.filter(pk=job.pk, claim_token=job.claim_token).update(
        payload=payload, claimed_until=until, next_attempt_at=until, updated_at=now
    )
    if renewed:
        job.payload, job.claimed_until, job.next_attempt_at = payload, until, until
    return renewed == 1


def jobs_complete(
    *, jobs: Sequence[Job], now: datetime, apply: Callable[[list[Job]], None] | None = None
) -> set[uuid.UUID]:
    """Mark several claimed jobs completed in one fenced statement and run `apply` on
    those still ours, in one transaction; returns their ids (the others were fenced out).
    If `apply` raises, nothing is written."""

    def changes(job: Job) -> dict[str, Any]:
        return {
            "status": after(job.status, Move.COMPLETE),
            "next_attempt_at": None,
            "completed_at": now,
            "updated_at": now,
            "attempt_history": _history(job, Outcome.COMPLETED),
            "return_value": job.return_value,
        }

    with transaction.atomic():
        done = fenced_update_many(Job, [(job.pk, job.claim_token, changes(job)) for job in jobs])
        if done and apply is not None:
            apply([job for job in jobs if job.pk in done])
    return done


def jobs_release(*, jobs: Sequence[Job], now: datetime) -> set[uuid.UUID]:
    """Give back claimed jobs that were never started (the worker is stopping, or their
    shared lease no longer covers another run): pending and due now, with the attempt
    their claim counted taken back. Fenced; returns the ids released."""
    items = [
        (
            job.pk,
            job.claim_token,
            {
                "status": after(job.status, Move.RELEASE),
                "attempts": job.attempts - 1,
                "next_attempt_at": now,
                "updated_at": now,
            },
        )
        for job in jobs
    ]
    return fenced_update_many(Job, items)


def job_fail(
    *,
    job: Job,
    now: datetime,
    category: ErrorCategory,
    error: str,
    permanent: bool = False,
    retry_after: float | None = None,
    exception: TaskException | None = None,
) -> Outcome:
    """Record a failed attempt of the claimed `job` (`exception`: a Django task's, for its
    attempt history).

    Back to `pending` after the backoff (at least `retry_after` seconds), or — when the
    error is permanent or the attempts are used up — `dead_lettered` with its
    `job_dead_lettered` signal (its project turns `failed`).
    """
    safe = safe_error_text(error)
    changes = {"last_error_category": category, "last_error": safe}
    if permanent or job.attempts >= job.max_attempts:
        history = _history(
            job, Outcome.DEAD_LETTERED, category=category, error=safe, exception=exception
        )
        return _dead_letter(job=job, now=now, attempt_history=history, **changes)
    delay = retry_delay(
        failures_before=job.attempts - 1,
        steps=settings.JOB_BACKOFF_SECONDS,
        retry_after=retry_after,
    )
    retried = fenced_update(
        Job,
        pk=job.pk,
        token=job.claim_token,
        status=after(job.status, Move.BACK_OFF),
        next_attempt_at=now + timedelta(seconds=delay),
        updated_at=now,
        attempt_history=_history(
            job, Outcome.BACKED_OFF, category=category, error=safe, exception=exception
        ),
        **changes,
    )
    return recorded(job, Move.BACK_OFF, retried, Outcome.BACKED_OFF)


def job_defer(*, job: Job, now: datetime, error: str, retry_after: float | None) -> Outcome:
    """The provider pushed back (429, 503 with Retry-After): put the claimed `job` back to
    `pending` at the time it named (at least a second), without using up an attempt — the
    claim's count is given back. Once BACKPRESSURE_MAX_DEFER_SECONDS have passed since the
    job was created, the push-back counts as a failed attempt (`rate_limited`), so a
    provider that never recovers still ends in a dead letter."""
    age = (now - job.created_at).total_seconds()
    if age >= settings.BACKPRESSURE_MAX_DEFER_SECONDS:
        return job_fail(
            job=job,
            now=now,
            category=ErrorCategory.RATE_LIMITED,
            error=error,
            retry_after=retry_after,
        )
    safe = safe_error_text(error)
    category = ErrorCategory.RATE_LIMITED
    deferred = fenced_update(
        Job,
        pk=job.pk,
        token=job.claim_token,
        status=after(job.status, Move.DEFER),
        attempts=max(job.attempts - 1, 0),
        next_attempt_at=now + timedelta(seconds=max(retry_after or 0.0, 1.0)),
        last_error_category=category,
        last_error=safe,
        updated_at=now,
        attempt_history=_history(job, Outcome.DEFERRED, category=category, error=safe),
    )
    return recorded(job, Move.DEFER, deferred, Outcome.DEFERRED)


def job_crashed(*, job: Job, now: datetime) -> Outcome:
    """Dead-letter a job whose previous claims used up its attempts without producing an
    outcome (it kills its worker). The claim that found it did not run it, so it is not
    counted as an attempt, and its entry in the history stands for the attempts that
    crashed."""
    category = ErrorCategory.CRASHED
    return _dead_letter(
        job=job,
        now=now,
        attempts=job.attempts - 1,
        last_error_category=category,
        last_error=_CRASHED,
        attempt_history=_history(job, Outcome.DEAD_LETTERED, category=category, error=_CRASHED),
    )


def _dead_letter(*, job: Job, now: datetime, **changes: object) -> Outcome:
    with transaction.atomic():
        dead = fenced_update(
            Job,
            pk=job.pk,
            token=job.claim_token,
            status=after(job.status, Move.DEAD_LETTER),
            next_attempt_at=None,
            updated_at=now,
            **changes,
        )
        if dead:
            job_dead_lettered.send(sender=Job, job=job, now=now)
    return recorded(job, Move.DEAD_LETTER, dead, Outcome.DEAD_LETTERED)


def job_retry(*, tenant: Tenant | None, job_id: uuid.UUID, now: datetime) -> Job:
    """Make the tenant's (None: a Django task's) dead-lettered job run again exactly like a
    new one: pending and due now, attempts and errors cleared (the attempt history is kept:
    it is what happened); `job_retried` is sent with it (its project goes back to
    `provisioning`).

    Raises Job.DoesNotExist when the tenant has no such job and JobNotRetryable when the
    job's status allows no retry (`jobs.states`). The claim token is kept: it only ever
    grows, so a claimant from before the retry can never pass the fence.
    """
    retryable = Job.objects.filter(pk=job_id, tenant=tenant, status__in=sources(Move.RETRY))
    with transaction.atomic():
        updated = retryable.update(
            status=target(Move.RETRY),
            attempts=0,
            next_attempt_at=now,
            last_error="",
            last_error_category="",
            claimed_until=None,
            completed_at=None,
            updated_at=now,
        )
        job = Job.objects.get(pk=job_id, tenant=tenant)
        if not updated:
            raise JobNotRetryable(job.status)
        job_retried.send(sender=Job, job=job, now=now)
    return job


def jobs_completed_before(*, before: datetime) -> models.QuerySet[Job]:
    """The jobs retention may delete: completed before `before`. Pending, running and
    dead-lettered jobs (dead letters wait for support staff) are never among them."""
    return Job.objects.filter(status=JobStatus.COMPLETED, completed_at__lt=before)
