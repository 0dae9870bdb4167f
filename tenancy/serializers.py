"""Output shapes of GET /v1/me."""

from rest_framework import serializers


class MeUserSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    email = serializers.EmailField()


class MeTenantSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="tenant.id")
    name = serializers.CharField(source="tenant.name")
    role = serializers.CharField()


class MeSerializer(serializers.Serializer):
    """`{user: {id, email}, tenants: [{id, name, role}]}` from `{"user", "memberships"}`."""

    user = MeUserSerializer()
    tenants = MeTenantSerializer(many=True, source="memberships")
