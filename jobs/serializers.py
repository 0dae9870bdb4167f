"""Shapes of the jobs API (the README's "API overview" and "The jobs outbox")."""

from typing import Any

from django.utils.dateparse import parse_datetime
from rest_framework import serializers

from jobs.models import Job, JobStatus
from jobs.services import Outcome
from outbound.categories import ERROR_CATEGORY_CHOICES
from web.fields import NullableCharField, NullableChoiceField
from web.serializers import NoBodySerializer


class JobSerializer(serializers.ModelSerializer):
    # Null for a job that is no project's (a webhook endpoint's recovery task).
    project_id = serializers.UUIDField(read_only=True, allow_null=True)
    last_error_category = NullableChoiceField(choices=ERROR_CATEGORY_CHOICES)
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


class StoredDateTimeField(serializers.DateTimeField):
    """A time kept as ISO 8601 text in a JSON column, rendered like every other time."""

    def to_representation(self, value: Any) -> Any:
        parsed = parse_datetime(value) if value else None
        return None if parsed is None else super().to_representation(parsed)


class AttemptSerializer(serializers.Serializer):
    """One entry of a job's attempt history, as `Job.attempt_history` stores it."""

    at = StoredDateTimeField(read_only=True, allow_null=True)
    outcome = serializers.ChoiceField(
        choices=[o.value for o in Outcome if o is not Outcome.FENCED_OUT], read_only=True
    )
    error_category = NullableChoiceField(choices=ERROR_CATEGORY_CHOICES)
    error = NullableCharField()


class JobDetailSerializer(JobSerializer):
    """A job with its attempt history (the newest attempts, oldest first)."""

    attempt_history = AttemptSerializer(many=True, read_only=True)

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "attempt_history"]
        read_only_fields = fields


class JobRetrySerializer(NoBodySerializer):
    representation = JobSerializer


class TaskSerializer(serializers.ModelSerializer):
    """A task: a job a client started (e.g. a webhook endpoint's recovery), with its
    progress: `done` of `total` items."""

    status = serializers.ChoiceField(choices=JobStatus.choices, read_only=True)
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

    def get_total(self, job: Job) -> int:
        return int(job.payload.get("total", 0))

    def get_done(self, job: Job) -> int:
        return int(job.payload.get("done", 0))
