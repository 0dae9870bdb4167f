"""Serializer fields the API resources share: stricter or clearer than DRF's defaults."""

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import EmailValidator, MaxLengthValidator, validate_email
from rest_framework import serializers
from rest_framework.utils.serializer_helpers import BindingDict


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


# What may not stand in a text that reaches a header (an e-mail's Subject): every line
# boundary Python's str.splitlines knows (CR, LF, VT, FF, FS, GS, RS, NEL, LS, PS) and NUL.
LINE_BREAKS = frozenset("\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\x00")
LINE_BREAK_RULE = "Must not contain a line break (CR, LF, NEL, U+2028, U+2029 and the like) or NUL."


def has_line_break(text: str) -> bool:
    return not LINE_BREAKS.isdisjoint(text)


def single_line(text: str) -> str:
    """`text` fit for a header: each line break or NUL a space (a row stored before names
    were checked)."""
    return "".join(" " if character in LINE_BREAKS else character for character in text)


class SingleLineCharField(StrictCharField):
    """A name that can reach a header (a tenant's or a project's, in an e-mail's Subject):
    a line break or NUL is refused."""

    default_error_messages = {"line_break": LINE_BREAK_RULE}

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if has_line_break(value):
            self.fail("line_break")
        return value


# RFC 5321 §4.5.3.1.3: a path is at most 256 octets with its angle brackets. Django's
# validator lets 320 through, which no address column (254) holds.
MAX_EMAIL_LENGTH = 254
_EMAIL_TOO_LONG = f"An email address has at most {MAX_EMAIL_LENGTH} characters."


def validate_email_address(value: str) -> None:
    """The one check of an email address the product takes, wherever it comes from (API,
    services, commands). Raises Django's ValidationError with a client-safe message."""
    if len(value) > MAX_EMAIL_LENGTH:
        raise ValidationError(_EMAIL_TOO_LONG)
    validate_email(value)


class EmailAddressField(serializers.EmailField):
    """An email address the API takes: `validate_email_address`, and its limit published as
    the schema's maxLength."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", MAX_EMAIL_LENGTH)
        super().__init__(**kwargs)
        # Its own length and address checks give way to the shared one (NUL and surrogate
        # checks stay).
        replaced = (MaxLengthValidator, EmailValidator)
        self.validators = [v for v in self.validators if not isinstance(v, replaced)]
        self.validators.append(validate_email_address)


class StrictBooleanField(serializers.BooleanField):
    """Only JSON true/false: DRF would also take 0, "yes" or "off", hiding client bugs."""

    def to_internal_value(self, data: Any) -> bool:
        if isinstance(data, bool):
            return data
        self.fail("invalid", input=data)


class StrictIntegerField(serializers.IntegerField):
    """Only a JSON integer: DRF would also take "5", 5.0 or true."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictUUIDField(serializers.UUIDField):
    """A UUID spelled in ASCII: Python's UUID() also reads digits of other scripts (U+0661)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and not data.isascii():
            self.fail("invalid", value=data)
        return super().to_internal_value(data)


class FieldsBoundOnce:
    """A serializer whose declared fields are built and bound once per class, then shared by
    every instance: DRF deep-copies and binds them for each instance, which cost an input
    serializer validated on every request more than validating did.

    Only for input serializers of plain value fields: a field that reads the serializer's
    context, instance or partial flag, or keeps state between calls, must not be shared.
    """

    @property
    def fields(self) -> BindingDict:
        cls = type(self)
        shared = cls.__dict__.get("_fields_bound_once")
        if shared is None:
            # Bound to a prototype without data, so no request's data stays referenced.
            shared = serializers.Serializer.fields.func(cls())  # type: ignore[attr-defined]
            cls._fields_bound_once = shared  # type: ignore[attr-defined]
        return shared
