"""Shapes of the jobs API (the README's "API overview" and "The jobs outbox")."""

from rest_framework import serializers

from jobs.models import Job, JobStatus
from outbound.categories import ErrorCategory
from web.fields import NullableCharField, NullableChoiceField
from web.serializers import NoBodySerializer


class JobSerializer(serializers.ModelSerializer):
    # Null for a job that is no project's (a webhook endpoint's recovery task).
    project_id = serializers.UUIDField(read_only=True, allow_null=True)
    last_error_category = NullableChoiceField(choices=ErrorCategory.choices)
    last_error = NullableCharField()

    class Meta:
        model = Job
        fields = [
            "id",
            "project_id",
            "kind",
            "status",
            "attempts",
            "max_attempts",
            "next_attempt_at",
            "last_error_category",
            "last_error",
            "last_attempt_at",
            "created_at",
            "completed_at",
        ]
        read_only_fields = fields


class JobRetrySerializer(NoBodySerializer):
    representation = JobSerializer


# A task's status in the words of a client following it (a job's `enqueued` is its claim).
TASK_STATUS = {
    JobStatus.PENDING: "pending",
    JobStatus.ENQUEUED: "running",
    JobStatus.COMPLETED: "completed",
    JobStatus.FAILED: "failed",
}


class TaskSerializer(serializers.ModelSerializer):
    """A task: a job a client started (e.g. a webhook endpoint's recovery), with its
    progress: `done` of `total` items."""

    status = serializers.SerializerMethodField()
    total = serializers.SerializerMethodField()
    done = serializers.SerializerMethodField()
    last_error = NullableCharField()

    class Meta:
        model = Job
        fields = [
            "id",
            "kind",
            "status",
            "total",
            "done",
            "last_error",
            "created_at",
            "completed_at",
        ]
        read_only_fields = fields

    def get_status(self, job: Job) -> str:
        return TASK_STATUS[JobStatus(job.status)]

    def get_total(self, job: Job) -> int:
        return int(job.payload.get("total", 0))

    def get_done(self, job: Job) -> int:
        return int(job.payload.get("done", 0))
