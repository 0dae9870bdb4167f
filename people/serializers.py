"""Input and output shapes of recipients and their preferences (people.recipients)."""

import re
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from delivery.validation import CATEGORY_PATTERN, CATEGORY_RULE
from people.models import Recipient
from people.quiet_hours import DAYS, window_errors
from web.fields import EmailAddressField, StrictBooleanField
from web.serializers import RejectsUndeclaredFields

MAX_CATEGORIES = 100
_CATEGORY = re.compile(CATEGORY_PATTERN)
_HH_MM = {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$"}


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "required": ["days", "from", "until"],
        "additionalProperties": False,
        "properties": {
            "days": {
                "type": "array",
                "items": {"type": "string", "enum": list(DAYS)},
                "minItems": 1,
                "maxItems": 7,
            },
            "from": _HH_MM,
            "until": _HH_MM,
        },
    }
)
class SendWindowField(serializers.JSONField):
    """{days, from, until}: when the recipient may be emailed, in their time zone."""

    def to_internal_value(self, data: Any) -> Any:
        if data is not None and (errors := window_errors(data)):
            raise serializers.ValidationError(errors)
        return data


class RecipientSerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="key")
    send_window = SendWindowField(allow_null=True)
    preferences = serializers.JSONField()

    class Meta:
        model = Recipient
        fields = [
            "id",
            "email",
            "name",
            "timezone",
            "send_window",
            "preferences",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class RecipientWriteSerializer(RejectsUndeclaredFields, serializers.Serializer):
    """The body of PUT /v1/recipients/{id}: the whole profile (preferences are kept)."""

    representation = RecipientSerializer

    email = EmailAddressField()
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    timezone = serializers.CharField(
        max_length=64, required=False, default="UTC", help_text='IANA time zone (default "UTC").'
    )
    send_window = SendWindowField(
        required=False,
        allow_null=True,
        default=None,
        help_text="When emails may reach them, in `timezone`; an email due outside it waits "
        "for the window's next opening. `until` not after `from` runs overnight. Null: any "
        "time.",
    )


class _ChannelChoices(RejectsUndeclaredFields, serializers.Serializer):
    email = StrictBooleanField(required=False)
    webhook = StrictBooleanField(required=False)


class _CategoryChoices(RejectsUndeclaredFields, serializers.Serializer):
    email = StrictBooleanField(required=False)
    webhook = StrictBooleanField(required=False)


class _Categories(serializers.DictField):
    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, dict):
            if len(data) > MAX_CATEGORIES:
                raise serializers.ValidationError(f"At most {MAX_CATEGORIES} categories.")
            if not all(isinstance(n, str) and _CATEGORY.fullmatch(n) for n in data):
                raise serializers.ValidationError(f"A category has {CATEGORY_RULE}.")
        return super().to_internal_value(data)


class PreferencesSerializer(RejectsUndeclaredFields, serializers.Serializer):
    """PUT /v1/recipients/{id}/preferences: what the recipient takes (absent means yes)."""

    channels = _ChannelChoices(required=False)
    categories = _Categories(child=_CategoryChoices(), required=False)

    def stored(self) -> dict[str, Any]:
        data = self.validated_data
        return {
            "channels": dict(data.get("channels", {})),
            "categories": {name: dict(c) for name, c in data.get("categories", {}).items()},
        }
