"""Shapes of GET/PATCH /v1/me and PATCH /v1/tenant."""

from rest_framework import serializers

from web.fields import SingleLineCharField, StrictCharField
from web.serializers import RejectsUndeclaredFields

# Kept in the user's `first_name` column (Django's user model: 150 characters).
MAX_USER_NAME = 150
MAX_TENANT_NAME = 200


class MeTenantSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="tenant.id")
    name = serializers.CharField(source="tenant.name")
    role = serializers.CharField()


class MeSerializer(serializers.Serializer):
    """The signed-in user and the tenants they may select, with their role in each."""

    id = serializers.IntegerField(source="user.id")
    email = serializers.EmailField(source="user.email")
    name = serializers.CharField(source="user.first_name")
    tenants = MeTenantSerializer(many=True, source="memberships")


class MePatchSerializer(RejectsUndeclaredFields, serializers.Serializer):
    representation = MeSerializer

    name = StrictCharField(max_length=MAX_USER_NAME, allow_blank=True, trim_whitespace=True)


class TenantSerializer(serializers.Serializer):
    id = serializers.UUIDField(read_only=True)
    name = serializers.CharField(read_only=True)
    created_at = serializers.DateTimeField(read_only=True)


class TenantPatchSerializer(RejectsUndeclaredFields, serializers.Serializer):
    representation = TenantSerializer

    name = SingleLineCharField(max_length=MAX_TENANT_NAME)


class UsageLimitSerializer(serializers.Serializer):
    used = serializers.IntegerField(
        allow_null=True, help_text="This period's use (null where nothing is counted)."
    )
    limit = serializers.IntegerField(allow_null=True, help_text="The plan's limit (null: none).")


class UsageSerializer(serializers.Serializer):
    """GET /v1/usage: the tenant's plan, the current period and each limit with its use."""

    plan = serializers.CharField(allow_null=True, help_text="The plan's name (null: no plan).")
    period_start = serializers.DateTimeField(source="period.start")
    period_end = serializers.DateTimeField(source="period.end")
    usage = serializers.DictField(child=UsageLimitSerializer())
