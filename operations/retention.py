"""Retention across the apps: each app names the rows it may lose; this decides when, and
deletes (or only counts) them. A tenant whose plan sets `retention_days` keeps its jobs,
completed notifications and delivery log that long; the others by the global policy."""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q, QuerySet

from dbqueue.batches import delete_in_batches
from delivery.retention import (
    deliveries_before,
    email_batches_before,
    notifications_completed_before,
)
from jobs.services import jobs_completed_before
from onboarding.signins import signin_links_ended
from tenancy.api.idempotency import operation_keys_expired
from tenancy.plans import retention_groups
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
            table: sum(delete_in_batches(rows, batch_size=policy.batch_size) for rows in parts)
            for table, parts in candidates.items()
        }
    )


def retention_preview(*, now: datetime, policy: RetentionPolicy) -> PruneCounts:
    """How many rows `retention_prune` would delete now, per table; deletes nothing."""
    return PruneCounts(
        **{
            table: sum(rows.count() for rows in parts)
            for table, parts in _candidates(now=now, policy=policy).items()
        }
    )


def _candidates(*, now: datetime, policy: RetentionPolicy) -> dict[str, list[QuerySet]]:
    groups = retention_groups()

    def by_tenant(rows_before: Callable[[datetime], QuerySet], days: int) -> list[QuerySet]:
        """The rows of tenants without a plan retention older than `days`, and each plan's
        tenants' rows older than its retention_days."""
        on_plans = Q()
        parts = []
        for plan_days, tenants in groups:
            parts.append(rows_before(now - timedelta(days=plan_days)).filter(tenants))
            on_plans |= tenants
        parts.append(rows_before(now - timedelta(days=days)).exclude(on_plans))
        return parts

    return {
        "jobs": by_tenant(lambda before: jobs_completed_before(before=before), policy.jobs_days),
        "notifications": by_tenant(
            lambda before: notifications_completed_before(before=before), policy.deliveries_days
        ),
        "deliveries": by_tenant(
            lambda before: deliveries_before(before=before), policy.deliveries_days
        ),
        "operation_keys": [operation_keys_expired(now=now)],
        "email_batches": [email_batches_before(before=now - EMAIL_BATCH_RETENTION)],
        "sessions": [sessions_ended(now=now)],
        "signin_links": [signin_links_ended(now=now)],
    }
