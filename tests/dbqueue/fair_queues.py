"""The two queues seen alike by the fair-claim tests: add ready rows of a tenant, claim."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from dbqueue.claims import ClaimSpec, claim
from delivery.models import Notification
from delivery.scheduler.tick import DUE
from jobs.consumer import JOB_CLAIM
from jobs.models import Job
from projects.models import Project
from tenancy.models import Tenant
from tests.delivery.factories import notification_fields

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)


def add_notifications(tenant: Tenant, due: Sequence[datetime]) -> list[Any]:
    rows = [Notification(**notification_fields(tenant=tenant, next_fire_at=at)) for at in due]
    return [row.pk for row in Notification.objects.bulk_create(rows)]


def add_jobs(tenant: Tenant, due: Sequence[datetime]) -> list[Any]:
    project = Project.objects.create(tenant=tenant, name="Import")
    rows = [
        Job(tenant=tenant, project=project, kind="provision", max_attempts=5, next_attempt_at=at)
        for at in due
    ]
    return [row.pk for row in Job.objects.bulk_create(rows)]


@dataclass(frozen=True)
class Queue:
    spec: ClaimSpec
    add: Callable[[Tenant, Sequence[datetime]], list[Any]]

    def claim(self, limit: int, *, now: datetime = NOW) -> set[Any]:
        return {row.pk for row in claim(self.spec, now=now, lease=LEASE, limit=limit)}


QUEUES = {"notifications": Queue(DUE, add_notifications), "jobs": Queue(JOB_CLAIM, add_jobs)}


def seconds_ago(*offsets: int) -> list[datetime]:
    return [NOW - timedelta(seconds=offset) for offset in offsets]
