"""Retention across the apps: each app names the rows it may lose; this decides when, and
deletes (or only counts) them."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import QuerySet

from dbqueue.batches import delete_in_batches
from jobs.services import jobs_completed_before
from notifications.retention import (
    deliveries_before,
    email_batches_before,
    notifications_completed_before,
)
from onboarding.signins import signin_links_ended
from tenancy.api.idempotency import operation_keys_expired
from tenancy.tokens import sessions_ended


@dataclass(frozen=True)
class RetentionPolicy:
    """How old finished rows must be before `prune` deletes them, and its batch size."""

    jobs_days: int
    deliveries_days: int
    batch_size: int

    def keeps_nothing(self) -> list[str]:
        """The tables whose retention is 0 days: every finished row in them goes."""
        ages = {"jobs": self.jobs_days, "deliveries": self.deliveries_days}
        return [table for table, days in ages.items() if days == 0]


@dataclass(frozen=True)
class PruneCounts:
    jobs: int
    notifications: int
    deliveries: int
    operation_keys: int
    email_batches: int
    sessions: int
    signin_links: int


# Resend keeps an idempotency key 24 h; a batch record is kept twice as long.
EMAIL_BATCH_RETENTION = timedelta(days=2)


def retention_prune(*, now: datetime, policy: RetentionPolicy) -> PruneCounts:
    """Delete completed jobs, completed notifications and delivery-log rows past their
    retention (a completed notification goes with the delivery log of its age), expired
    operation keys, old email batch records, ended sessions and sign-in links, in bounded
    batches. Live rows are never
    candidates: pending, running and dead-lettered jobs (they wait for support staff)
    stay, as do notifications on their schedule, dead-lettered or parked; the delivery log
    is history only."""
    candidates = _candidates(now=now, policy=policy)
    return PruneCounts(
        **{
            table: delete_in_batches(rows, batch_size=policy.batch_size)
            for table, rows in candidates.items()
        }
    )


def retention_preview(*, now: datetime, policy: RetentionPolicy) -> PruneCounts:
    """How many rows `retention_prune` would delete now, per table; deletes nothing."""
    return PruneCounts(
        **{table: rows.count() for table, rows in _candidates(now=now, policy=policy).items()}
    )


def _candidates(*, now: datetime, policy: RetentionPolicy) -> dict[str, QuerySet]:
    deliveries_before_time = now - timedelta(days=policy.deliveries_days)
    return {
        "jobs": jobs_completed_before(before=now - timedelta(days=policy.jobs_days)),
        "notifications": notifications_completed_before(before=deliveries_before_time),
        "deliveries": deliveries_before(before=deliveries_before_time),
        "operation_keys": operation_keys_expired(now=now),
        "email_batches": email_batches_before(before=now - EMAIL_BATCH_RETENTION),
        "sessions": sessions_ended(now=now),
        "signin_links": signin_links_ended(now=now),
    }
