"""Plain factory functions for projects and their provision jobs."""

import uuid

from django.utils import timezone

from jobs.models import Job
from projects.models import Project
from projects.serializers import ProjectSerializer
from projects.services import project_create


def make_project(actor, *, name: str = "Website relaunch", invite: list[str] | None = None):
    """A project created through the service, as POST /v1/projects would; returns it."""
    outcome = project_create(
        tenant=actor.tenant,
        user=actor.user,
        name=name,
        invite=invite or [],
        key=f"factory-{uuid.uuid4()}",
        fingerprint="factory",
        render=lambda project: ProjectSerializer(project).data,
        now=timezone.now(),
    )
    return Project.objects.get(pk=outcome.project_id)


def make_job(actor, **fields) -> Job:
    """The provision job of a fresh project in the actor's tenant, with `fields` applied."""
    job = Job.objects.get(project=make_project(actor))
    if fields:
        Job.objects.filter(pk=job.pk).update(**fields)
        job.refresh_from_db()
    return job
