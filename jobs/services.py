"""The writes of the jobs outbox: fenced outcomes of a claimed job, the support retry, pruning.

Every outcome of a claimed job is one short transaction conditional on the claim token the
claim returned (`dbqueue.claims.fenced_update`); `False`/`Outcome.FENCED_OUT` means the job was
reclaimed after our lease ran out, so the stale outcome changed nothing.
"""

import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from django.conf import settings
from django.db import transaction

from dbqueue.batches import delete_in_batches
from dbqueue.claims import fenced_update
from jobs.models import ErrorCategory, Job, JobStatus
from notifications.models import Delivery
from notifications.scheduler import outcomes
from projects.models import Project, ProjectStatus
from projects.services import operation_keys_purge
from tenancy.models import Tenant

_ERROR_MAX = 500
_QUERY_STRING = re.compile(r"(https?://[^\s?#]*)[?#]\S*", re.IGNORECASE)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")
_CRASHED = "The previous attempt ended without an outcome: the worker crashed or was killed."


class Outcome(StrEnum):
    COMPLETED = "completed"
    RETRIED = "retried"
    FAILED = "failed"
    FENCED_OUT = "fenced_out"


class JobNotRetryable(Exception):
    """Only a `failed` job can be retried; `status` is the job's current status."""

    def __init__(self, status: str) -> None:
        super().__init__(f"Only a failed job can be retried; this job is {status}.")
        self.status = status


def safe_error_text(text: str) -> str:
    """`text` without URL query strings or e-mail addresses, cut to fit `Job.last_error`."""
    text = _QUERY_STRING.sub(r"\1", text)
    text = _EMAIL.sub("<address>", text)
    return text[:_ERROR_MAX]


def backoff_seconds(*, attempts: int, schedule: Sequence[int]) -> int:
    """The wait before the next attempt after `attempts` attempts (1-based); the schedule's
    last step repeats once it is exhausted (the scheduler's rule, counted from 1)."""
    return outcomes.backoff_seconds(error_count_before=attempts - 1, steps=schedule)


def job_complete(*, job: Job, now: datetime, apply: Callable[[], None] | None = None) -> bool:
    """Mark the claimed `job` completed and run `apply` (the handler's local writes) in the
    same transaction, so a fenced-out run applies nothing. False when fenced out."""
    with transaction.atomic():
        done = fenced_update(
            Job,
            pk=job.pk,
            token=job.claim_token,
            status=JobStatus.COMPLETED,
            next_attempt_at=None,
            completed_at=now,
            updated_at=now,
        )
        if done and apply is not None:
            apply()
    return done


def job_fail(
    *,
    job: Job,
    now: datetime,
    category: str,
    error: str,
    permanent: bool = False,
    retry_after: float | None = None,
) -> Outcome:
    """Record a failed attempt of the claimed `job`.

    Back to `pending` after the backoff (at least `retry_after` seconds), or — when the
    error is permanent or the attempts are used up — `failed` (the dead letter) with its
    project `failed` too.
    """
    changes = {"last_error_category": category, "last_error": safe_error_text(error)}
    if permanent or job.attempts >= job.max_attempts:
        return _dead_letter(job=job, now=now, **changes)
    delay = outcomes.retry_delay(
        error_count_before=job.attempts - 1,
        steps=settings.JOB_BACKOFF_SECONDS,
        retry_after=retry_after,
    )
    retried = fenced_update(
        Job,
        pk=job.pk,
        token=job.claim_token,
        status=JobStatus.PENDING,
        next_attempt_at=now + timedelta(seconds=delay),
        updated_at=now,
        **changes,
    )
    return Outcome.RETRIED if retried else Outcome.FENCED_OUT


def job_crashed(*, job: Job, now: datetime) -> Outcome:
    """Dead-letter a job whose previous claims used up its attempts without producing an
    outcome (it kills its worker). The claim that found it did not run it, so it is not
    counted as an attempt."""
    return _dead_letter(
        job=job,
        now=now,
        attempts=job.attempts - 1,
        last_error_category=ErrorCategory.CRASHED,
        last_error=_CRASHED,
    )


def _dead_letter(*, job: Job, now: datetime, **changes: object) -> Outcome:
    with transaction.atomic():
        failed = fenced_update(
            Job,
            pk=job.pk,
            token=job.claim_token,
            status=JobStatus.FAILED,
            next_attempt_at=None,
            updated_at=now,
            **changes,
        )
        if failed:
            Project.objects.filter(pk=job.project_id).update(
                status=ProjectStatus.FAILED, updated_at=now
            )
    return Outcome.FAILED if failed else Outcome.FENCED_OUT


def job_retry(*, tenant: Tenant, job_id: uuid.UUID, now: datetime) -> Job:
    """Make the tenant's failed job run again exactly like a new one: pending and due now,
    attempts and errors cleared, its project back to `provisioning`.

    Raises Job.DoesNotExist when the tenant has no such job and JobNotRetryable when the
    job is not `failed`. The claim token is kept: it only ever grows, so a claimant from
    before the retry can never pass the fence.
    """
    with transaction.atomic():
        updated = Job.objects.filter(pk=job_id, tenant=tenant, status=JobStatus.FAILED).update(
            status=JobStatus.PENDING,
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
        Project.objects.filter(pk=job.project_id).update(
            status=ProjectStatus.PROVISIONING, updated_at=now
        )
    return job


@dataclass(frozen=True)
class RetentionPolicy:
    """How old finished rows must be before `prune` deletes them, and its batch size."""

    jobs_days: int
    deliveries_days: int
    batch_size: int


@dataclass(frozen=True)
class PruneCounts:
    jobs: int
    deliveries: int
    operation_keys: int


def retention_prune(*, now: datetime, policy: RetentionPolicy) -> PruneCounts:
    """Delete completed jobs and delivery-log rows past their retention, and expired
    operation keys, in bounded batches. Live rows are never candidates: pending, enqueued
    and failed jobs (dead letters wait for support staff) stay, as do the notifications
    themselves; the delivery log is history only."""
    finished_jobs = Job.objects.filter(
        status=JobStatus.COMPLETED, completed_at__lt=now - timedelta(days=policy.jobs_days)
    )
    old_deliveries = Delivery.objects.filter(
        attempted_at__lt=now - timedelta(days=policy.deliveries_days)
    )
    return PruneCounts(
        jobs=delete_in_batches(finished_jobs, batch_size=policy.batch_size),
        deliveries=delete_in_batches(old_deliveries, batch_size=policy.batch_size),
        operation_keys=operation_keys_purge(now=now, batch_size=policy.batch_size),
    )
