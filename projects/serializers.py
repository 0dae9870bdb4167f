"""Input and output shapes of the projects API (the README's "API overview")."""

from typing import TYPE_CHECKING, Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from projects.models import Project, ProjectStatus
from web.fields import EmailAddressField, FieldsBoundOnce, SingleLineCharField
from web.representation import Representation
from web.serializers import RejectsUndeclaredFields

if TYPE_CHECKING:
    from projects.services import ProjectWithJob

MAX_INVITES = 50


class JobSummarySerializer(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.CharField()


class ProjectSerializer(serializers.Serializer):
    """A project with its provisioning job.

    Reads the job from the `provision_job_id` / `provision_job_status` attributes that
    `project_queryset` annotates (and `project_create` sets), so a page is one query.
    """

    schema_description = "A project with its provisioning job."

    # Declared rather than derived from the model: it is built on every create and for every
    # listed project, and ModelSerializer introspects the model each time.
    id = serializers.UUIDField(read_only=True)
    name = serializers.CharField(read_only=True)
    status = serializers.ChoiceField(choices=ProjectStatus.choices, read_only=True)
    created_at = serializers.DateTimeField(read_only=True)
    updated_at = serializers.DateTimeField(read_only=True)
    job = serializers.SerializerMethodField()

    @extend_schema_field(JobSummarySerializer(allow_null=True))
    def get_job(self, project: "ProjectWithJob") -> dict[str, str | None] | None:
        job_id = getattr(project, "provision_job_id", None)
        if job_id is None:
            return None
        return {"id": str(job_id), "status": project.provision_job_status}


class ProjectCreateSerializer(RejectsUndeclaredFields, FieldsBoundOnce, serializers.Serializer):
    """`{name, invite?: [emails]}`; any other field is rejected so typos do not pass silently.

    Validated on every create: its plain value fields are bound once and shared."""

    representation = ProjectSerializer

    name = SingleLineCharField(max_length=200)
    invite = serializers.ListField(
        child=EmailAddressField(),
        required=False,
        default=list,
        max_length=MAX_INVITES,
        help_text=f"Up to {MAX_INVITES} addresses to invite; empty means the creator.",
    )


class ProjectPatchSerializer(RejectsUndeclaredFields, serializers.Serializer):
    """`{name}`: the only field of a project a client changes."""

    representation = ProjectSerializer

    name = SingleLineCharField(max_length=200)


# Bound once: a serializer instance deep-copies its declared fields, which cost a create
# more than rendering the project does, and a page of 50 projects far more.
PROJECTS = Representation(ProjectSerializer)


def project_representation(project: Project) -> dict[str, Any]:
    """The project as ProjectSerializer renders it (what a create answers and stores)."""
    return PROJECTS.one(project)
