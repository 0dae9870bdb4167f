"""Shapes of the members and tokens API (GET/PATCH/DELETE /v1/members, /v1/tokens)."""

from rest_framework import serializers

from tenancy.models import ApiToken, Role
from web.fields import StrictCharField, StrictIntegerField
from web.serializers import RejectsUndeclaredFields

MAX_TOKEN_DAYS = 3650


class MemberSerializer(serializers.Serializer):
    user_id = serializers.IntegerField()
    email = serializers.EmailField(source="user.email")
    role = serializers.ChoiceField(choices=Role.choices)
    joined_at = serializers.DateTimeField(source="created_at")


class MemberPatchSerializer(RejectsUndeclaredFields, serializers.Serializer):
    representation = MemberSerializer

    role = serializers.ChoiceField(choices=Role.choices)


class TokenSerializer(serializers.ModelSerializer):
    tenant_id = serializers.UUIDField(
        allow_null=True, read_only=True, help_text="The one tenant this token acts in; null: any."
    )

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created_at", "last_used_at", "expires_at", "tenant_id"]
        read_only_fields = fields


class TokenSecretSerializer(TokenSerializer):
    """The create's answer: the token's fields and, this once, its secret."""

    schema_description = "The new token with its secret, shown this once."

    token = serializers.CharField(
        source="plaintext", read_only=True, help_text="The secret; shown only in this answer."
    )

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "token"]
        read_only_fields = fields


class TokenCreateSerializer(RejectsUndeclaredFields, serializers.Serializer):
    representation = TokenSecretSerializer

    name = StrictCharField(max_length=100)
    expires_in_days = StrictIntegerField(
        min_value=1, max_value=MAX_TOKEN_DAYS, required=False, help_text="Default: never."
    )
    tenant_id = serializers.UUIDField(
        required=False,
        help_text="Bind the token to this tenant (you must be a member): it is 403 in any "
        "other. Default: every tenant you belong to.",
    )
