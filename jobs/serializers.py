"""Shapes of the jobs API (the README's "API overview" and "The jobs outbox")."""

from rest_framework import serializers

from jobs.models import Job
from outbound.categories import ErrorCategory
from web.fields import NullableCharField, NullableChoiceField
from web.serializers import NoBodySerializer


class JobSerializer(serializers.ModelSerializer):
    project_id = serializers.UUIDField(read_only=True)
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
