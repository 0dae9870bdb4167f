"""The writes of projects — the idempotent create, rename, delete, activation and failure —
and the reads of the projects API. Only this module writes projects.

The create's Idempotency-Key is tenancy.api.idempotency's: its row goes in with the project and
the job, so a create costs one statement on PostgreSQL.
"""

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeAlias, TypedDict, cast

from django.contrib.auth.models import User
from django.db import models, transaction

from dbtools.compiled import Param
from dbtools.pages import CompiledPages
from delivery.models import NotificationSource
from delivery.outbox import Event, event_rows
from jobs.models import Job, JobStatus
from jobs.services import job_enqueue
from projects.models import PROVISION_KIND, Project, ProjectStatus
from tenancy.api.idempotency import Answer
from tenancy.models import OperationKey, Tenant

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class ProvisionJob(TypedDict):
    """The columns of its provision job a project is read with (None: it has none)."""

    provision_job_id: uuid.UUID | None
    provision_job_status: str | None


ProjectWithJob: TypeAlias = "WithAnnotations[Project, ProvisionJob]"


def project_queryset(*, tenant: Tenant) -> models.QuerySet[ProjectWithJob]:
    """The tenant's projects, each annotated with its provision job (one SQL statement)."""
    return _with_provision_job(Project.objects.filter(tenant=tenant))


def _with_provision_job(projects: models.QuerySet[Project]) -> models.QuerySet[ProjectWithJob]:
    provision_jobs = Job.objects.filter(
        project=models.OuterRef("pk"), kind=PROVISION_KIND
    ).order_by("created_at")
    return projects.annotate(
        provision_job_id=models.Subquery(provision_jobs.values("id")[:1]),
        provision_job_status=models.Subquery(provision_jobs.values("status")[:1]),
    )


# Compiling the list's query (two subqueries) cost a page more than running it.
_PROJECT_PAGES = CompiledPages(
    lambda fields: _with_provision_job(
        Project.objects.filter(tenant_id=Param("tenant", models.UUIDField()))
    ).values_list(*fields, "provision_job_id", "provision_job_status", named=True)
)


def project_pages(*, tenant: Tenant, fields: Sequence[str]) -> Any:
    """`project_queryset(tenant=tenant)` as named rows of `fields` and the provision job's
    `provision_job_id` and `provision_job_status`, for GET /v1/projects's cursor paginator
    (which orders by created_at), its SQL compiled once per page shape
    (dbtools.pages.CompiledPages)."""
    return _PROJECT_PAGES.of(tuple(fields), tenant=tenant.id)


def project_create(
    *,
    tenant: Tenant,
    user: User,
    name: str,
    invite: list[str],
    key_row: Callable[[Answer], OperationKey],
    render: Callable[[Project], dict[str, Any]],
    now: datetime,
) -> Answer:
    """Create a project with its pending provision job and the answer (202, `render` of
    the new project, which carries `provision_job_id` and `provision_job_status` like
    `project_queryset`'s rows) recorded under its key: `key_row(answer)` is inserted with
    them, all or none, in one statement on PostgreSQL. The key's uniqueness error
    propagates for tenancy.api.idempotency to replay."""
    project = cast(
        ProjectWithJob,
        Project(
            id=uuid.uuid4(),
            tenant=tenant,
            name=name,
            created_by=user,
            created_at=now,
            updated_at=now,
        ),
    )
    job_id = uuid.uuid4()
    project.provision_job_id = job_id
    project.provision_job_status = JobStatus.PENDING
    answer = Answer.of(202, render(project), resource=f"/v1/projects/{project.id}", location=True)
    # A concurrent identical request waits on the key's unique index until this one
    # commits, then fails with its project and job, so only one request creates anything.
    # Foreign keys are checked at commit, so the key may come before the project.
    # The project.created message and its deliveries go in the same statement.
    created = Event(
        tenant_id=tenant.id,
        event_type="project.created",
        payload={"project_id": str(project.id), "tenant_id": str(tenant.id), "name": name},
        project_id=project.id,
        source=NotificationSource.SYSTEM,
    )
    job_enqueue(
        tenant=tenant,
        kind=PROVISION_KIND,
        payload={"invite": invite},
        project_id=project.id,
        job_id=job_id,
        now=now,
        alongside=(key_row(answer), project, *event_rows(created, now=now)),
    )
    return answer


def project_rename(*, tenant: Tenant, project_id: uuid.UUID, name: str, now: datetime) -> Project:
    """Rename the tenant's project; returns it as `project_queryset` reads it. Raises
    Project.DoesNotExist when the tenant has no such project."""
    renamed = Project.objects.filter(pk=project_id, tenant=tenant).update(name=name, updated_at=now)
    if not renamed:
        raise Project.DoesNotExist
    return project_queryset(tenant=tenant).get(pk=project_id)


def project_delete(*, tenant: Tenant, project_id: uuid.UUID) -> None:
    """Delete the tenant's project with its jobs; its notifications stay, without a project.

    A pending provision job goes with it (cancelled). A job being run right now finishes,
    but its outcome is fenced out (its row is gone), so nothing of it is applied to the
    deleted project. The jobs are locked before the project, in the order the consumer
    writes them back (job, then project), so a delete and a completion never deadlock:
    one waits for the other. Raises Project.DoesNotExist when the tenant has no such
    project (a second delete too)."""
    with transaction.atomic():
        list(Job.objects.select_for_update().filter(project_id=project_id, tenant=tenant))
        project = Project.objects.select_for_update().get(pk=project_id, tenant=tenant)
        project.delete()


def projects_activate(*, project_ids: Sequence[uuid.UUID], now: datetime) -> list[Project]:
    """Mark projects active (their workspaces are provisioned) in one statement; returns
    them with their creators (one more), in no particular order."""
    Project.objects.filter(pk__in=project_ids).update(status=ProjectStatus.ACTIVE, updated_at=now)
    return list(Project.objects.select_related("created_by").filter(pk__in=project_ids))


def project_fail(*, project_id: uuid.UUID, now: datetime) -> Project:
    """Mark the project failed (its provisioning was dead-lettered); returns it with its
    creator."""
    Project.objects.filter(pk=project_id).update(status=ProjectStatus.FAILED, updated_at=now)
    return Project.objects.select_related("created_by").get(pk=project_id)


def project_reprovision(*, project_id: uuid.UUID, now: datetime) -> None:
    """Put a failed project back to provisioning: support staff retried its job."""
    Project.objects.filter(pk=project_id).update(status=ProjectStatus.PROVISIONING, updated_at=now)
