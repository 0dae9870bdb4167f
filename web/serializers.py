"""What every write serializer of the API shares: a body names only fields it may set."""

from collections.abc import Mapping
from functools import cache
from typing import Any, cast

from rest_framework import serializers

UNKNOWN_FIELD = "Unknown field."
READ_ONLY_FIELD = "Read-only field: it cannot be set by this request."


class RejectsUndeclaredFields:
    """Mix into an input serializer: a body field it does not declare writable is a 400
    naming it, "read-only" when the resource's `representation` shows it (`id`, `state`,
    `secret`…) or it is declared read-only, else "unknown", so a typo or an attempt to set
    server-owned data never passes silently.

    The errors join the fields' own, so one answer lists everything wrong with the body.
    """

    representation: type[serializers.BaseSerializer] | None = None

    def to_internal_value(self, data: Any) -> Any:
        undeclared = self._undeclared_field_errors(data)
        try:
            value = super().to_internal_value(data)  # type: ignore[misc]
        except serializers.ValidationError as exc:
            if undeclared and isinstance(exc.detail, dict):
                detail = cast(dict[str, Any], exc.detail)
                raise serializers.ValidationError({**detail, **undeclared}) from None
            raise
        if undeclared:
            raise serializers.ValidationError(undeclared)
        return value

    def _undeclared_field_errors(self, data: Any) -> dict[str, list[str]]:
        if not isinstance(data, Mapping):
            return {}  # DRF answers "expected a dictionary" for it
        fields = self.fields  # type: ignore[attr-defined]
        writable = {name for name, field in fields.items() if not field.read_only}
        # A class is hashable; the stubs' BaseSerializer declares __hash__ in a way mypy rejects.
        representation: Any = self.representation
        shown = _field_names(representation) if representation else frozenset()
        return {
            name: [READ_ONLY_FIELD if name in shown or name in fields else UNKNOWN_FIELD]
            for name in sorted(set(data) - writable)
        }


class NoBodySerializer(RejectsUndeclaredFields, serializers.Serializer):
    """The body of an action that takes no input: absent or `{}`, nothing else."""


@cache
def _field_names(serializer_class: type[serializers.BaseSerializer]) -> frozenset[str]:
    return frozenset(serializer_class().fields)  # type: ignore[attr-defined]
