"""Plain factory functions for the jobs tests."""

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from delivery.models import WebhookEndpoint
from jobs.models import Job
from projects.models import Project
from tenancy.models import Tenant
from tests.delivery import factories as notification_factories

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def make_job(
    tenant: Tenant,
    *,
    user: Any = None,
    name: str = "Website relaunch",
    invite: Sequence[str] = (),
    kind: str = "provision",
    now: datetime = NOW,
    **fields: Any,
) -> Job:
    """A project in `provisioning` with its pending job, due at `now`."""
    project = Project.objects.create(
        tenant=tenant, name=name, created_by=user, created_at=now, updated_at=now
    )
    values = {
        "max_attempts": 5,
        "next_attempt_at": now,
        "created_at": now,
        "updated_at": now,
        "payload": {"invite": list(invite)},
    }
    values.update(fields)
    return Job.objects.create(tenant=tenant, project=project, kind=kind, **values)


def make_endpoint(tenant: Tenant, *, enabled: bool = True) -> WebhookEndpoint:
    return notification_factories.make_endpoint(
        tenant=tenant, url="https://hooks.example.com/tickwork", enabled=enabled
    )


def reload(job: Job) -> Job:
    return Job.objects.select_related("project").get(pk=job.pk)
