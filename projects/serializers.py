"""Input and output shapes of the projects API (DESIGN §3)."""

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from projects.models import Project

MAX_INVITES = 50


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers and booleans instead of silently stringifying them."""

    default_error_messages = {"invalid": "Must be a string."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class ProjectCreateSerializer(serializers.Serializer):
    """`{name, invite?: [emails]}`; any other field is rejected so typos do not pass silently."""

    name = StrictCharField(max_length=200)
    invite = serializers.ListField(
        child=serializers.EmailField(),
        required=False,
        default=list,
        max_length=MAX_INVITES,
        help_text=f"Up to {MAX_INVITES} addresses to invite; empty means the creator.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(self.initial_data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return attrs


class JobSummarySerializer(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.CharField()


class ProjectSerializer(serializers.ModelSerializer):
    """A project with its provisioning job.

    Reads the job from the `provision_job_id` / `provision_job_status` attributes that
    `project_queryset` annotates (and `project_create` sets), so a page is one query.
    """

    job = serializers.SerializerMethodField()

    class Meta:
        model = Project
        fields = ["id", "name", "status", "created_at", "updated_at", "job"]
        read_only_fields = fields

    @extend_schema_field(JobSummarySerializer(allow_null=True))
    def get_job(self, project: Project) -> dict[str, str] | None:
        job_id = getattr(project, "provision_job_id", None)
        if job_id is None:
            return None
        return {"id": str(job_id), "status": project.provision_job_status}
