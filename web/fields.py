"""Serializer fields the API resources share: stricter or clearer than DRF's defaults."""

from typing import Any

from rest_framework import serializers


class BlankAsNullMixin:
    """Renders an empty stored string as null: "no value" reads as null in the API and
    matches the nullable type the OpenAPI document declares."""

    def to_representation(self, value: Any) -> Any:
        return value or None


class NullableChoiceField(BlankAsNullMixin, serializers.ChoiceField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_null=True, read_only=True, **kwargs)


class NullableCharField(BlankAsNullMixin, serializers.CharField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_null=True, read_only=True, **kwargs)


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers and booleans instead of silently stringifying them."""

    default_error_messages = {"invalid": "Must be a string."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """Only JSON true/false: DRF would also take 0, "yes" or "off", hiding client bugs."""

    def to_internal_value(self, data: Any) -> bool:
        if isinstance(data, bool):
            return data
        self.fail("invalid", input=data)
