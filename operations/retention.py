"""Retention across the apps: each app deletes its own rows; this decides when."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from jobs.services import jobs_prune_completed
from notifications.services import deliveries_prune, email_batches_prune
from tenancy.idempotency import operation_keys_purge


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
    email_batches: int


# Resend keeps an idempotency key 24 h; a batch record is kept twice as long.
EMAIL_BATCH_RETENTION = timedelta(days=2)


def retention_prune(*, now: datetime, policy: RetentionPolicy) -> PruneCounts:
    """Delete completed jobs and delivery-log rows past their retention, expired operation
    keys and old email batch records, in bounded batches. Live rows are never candidates:
    pending, enqueued and failed jobs (dead letters wait for support staff) stay, as do the
    notifications themselves; the delivery log is history only."""
    return PruneCounts(
        jobs=jobs_prune_completed(
            before=now - timedelta(days=policy.jobs_days), batch_size=policy.batch_size
        ),
        deliveries=deliveries_prune(
            before=now - timedelta(days=policy.deliveries_days), batch_size=policy.batch_size
        ),
        operation_keys=operation_keys_purge(now=now, batch_size=policy.batch_size),
        email_batches=email_batches_prune(
            before=now - EMAIL_BATCH_RETENTION, batch_size=policy.batch_size
        ),
    )
