"""Plain factory functions for projects and their provision jobs."""

import json
import uuid

from django.utils import timezone

from jobs.models import Job
from projects.models import Project
from projects.serializers import ProjectSerializer
from projects.services import project_create
from tenancy.api.idempotency import Idempotency


def make_project(actor, *, name: str = "Website relaunch", invite: list[str] | None = None):
    """A project created through the service, as POST /v1/projects would; returns it."""
    now = timezone.now()
    key = Idempotency(tenant=actor.tenant, key=f"factory-{uuid.uuid4()}", fingerprint="f", now=now)
    answer = project_create(
        tenant=actor.tenant,
        user=actor.user,
        name=name,
        invite=invite or [],
        key_row=key.key_row,
        render=lambda project: ProjectSerializer(project).data,
        now=now,
    )
    return Project.objects.get(pk=json.loads(answer.body)["id"])


def make_job(actor, **fields) -> Job:
    """The provision job of a fresh project in the actor's tenant, with `fields` applied."""
    job = Job.objects.get(project=make_project(actor))
    if fields:
        Job.objects.filter(pk=job.pk).update(**fields)
        job.refresh_from_db()
    return job
