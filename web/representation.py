"""Output serializers compiled once, for the rows of a list page.

DRF renders each row of a page through its generic machinery: per field a readable-fields
generator, a `get_attribute` that walks the source with try/except, a PKOnlyObject check,
and for every datetime a lookup of the current time zone through a context-local. For a
page of 50 notifications of 18 fields that cost more than the rest of the request, the
query included.

`Representation(serializer_class)` binds the serializer's fields once and compiles each
into (name, a getter of its source, its own `to_representation`, or the builtin that DRF's
own string, integer, UUID and list fields apply); a datetime field's time zone is looked up
once per call rather than once per value. A page is rendered column by column. What it
returns is what the serializer returns, key order included. It takes output serializers
whose fields read one attribute each (not a method) or are `SerializerMethodField`s, and
use no context; any other field is refused when the first row is rendered.
"""

import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, tzinfo
from functools import cached_property
from typing import Any, cast

from django.core.exceptions import ImproperlyConfigured
from rest_framework import ISO_8601, generics, serializers
from rest_framework.relations import ManyRelatedField, RelatedField
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

Row = Any
Render = Callable[[Any], Any]
_UTC_SUFFIX = "+00:00"


def _whole_row(row: Row) -> Row:
    return row


def _renders_iso_datetime(field: serializers.Field) -> bool:
    """A DateTimeField rendered by DRF's own code as ISO 8601."""
    cls = type(field)
    return (
        isinstance(field, serializers.DateTimeField)
        and cls.to_representation is serializers.DateTimeField.to_representation
        and cls.enforce_timezone is serializers.DateTimeField.enforce_timezone  # type: ignore[attr-defined]
        and getattr(field, "format", api_settings.DATETIME_FORMAT).lower() == ISO_8601
    )


def _iso_datetime(field: serializers.DateTimeField) -> Render:
    """The field's to_representation with its time zone resolved now, as DRF resolves it
    for each value; what is not an aware datetime goes to the field itself."""
    zone: tzinfo | None = field.timezone if hasattr(field, "timezone") else field.default_timezone()
    if zone is None:
        return field.to_representation

    def render(value: Any) -> Any:
        if not isinstance(value, datetime) or value.utcoffset() is None:
            return field.to_representation(value)
        text = value.astimezone(zone).isoformat()
        return text[:-6] + "Z" if text.endswith(_UTC_SUFFIX) else text

    return render


@dataclass(frozen=True)
class _Compiled:
    name: str
    source: str | None
    read: Callable[[Row], Any]
    field: serializers.Field
    iso_datetime: bool

    @classmethod
    def of(cls, field: serializers.Field) -> "_Compiled":
        attrs = field.source_attrs
        if isinstance(field, RelatedField | ManyRelatedField) or len(attrs) > 1:
            raise ImproperlyConfigured(f"Representation cannot compile field {field!r}")
        source = attrs[0] if attrs else None
        read = _whole_row if source is None else operator.attrgetter(source)
        return cls(cast(str, field.field_name), source, read, field, _renders_iso_datetime(field))

    def renderer(self) -> Render:
        if self.iso_datetime:
            return _iso_datetime(cast(serializers.DateTimeField, self.field))
        return _renderer(self.field)


def _renderer(field: serializers.Field) -> Render:
    """The field's to_representation, or the builtin it applies to every value: DRF's own
    CharField (EmailField too) renders `str(value)`, IntegerField `int(value)`, UUIDField in
    its default format `str(value)`, and ListField each item as its child does."""
    own = type(field).to_representation
    if own is serializers.CharField.to_representation:
        return str
    if own is serializers.IntegerField.to_representation:
        return int
    if (
        own is serializers.UUIDField.to_representation
        and cast(serializers.UUIDField, field).uuid_format == "hex_verbose"
    ):
        return str
    if own is serializers.ListField.to_representation:
        child = _renderer(cast(serializers.ListField, field).child)
        return lambda items: [None if item is None else child(item) for item in items]
    return field.to_representation


class Representation:
    """Renders rows as `serializer_class(row).data` would, faster (see the module)."""

    def __init__(self, serializer_class: type[serializers.Serializer]) -> None:
        self.serializer_class = serializer_class

    @cached_property
    def _fields(self) -> tuple[_Compiled, ...]:
        # Bound once: these fields keep no state between rows and read no context.
        serializer = self.serializer_class()
        return tuple(_Compiled.of(field) for field in serializer._readable_fields)

    @cached_property
    def attributes(self) -> tuple[str, ...]:
        """The row attributes its fields read, in order: the columns a list page selects
        (a method field reads what its method reads, named by the list's query)."""
        return tuple(entry.source for entry in self._fields if entry.source is not None)

    def many(self, rows: Iterable[Row]) -> list[dict[str, Any]]:
        """Every row rendered, in order: the page of a list endpoint."""
        rows = list(rows)
        # Column by column: one tight loop per field instead of a loop over fields per row.
        columns = [_column(rows, entry.read, entry.renderer()) for entry in self._fields]
        names = [entry.name for entry in self._fields]
        return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]

    def one(self, row: Row) -> dict[str, Any]:
        return self.many([row])[0]


def _column(rows: list[Row], read: Callable[[Row], Any], render: Render) -> list[Any]:
    # DRF renders a missing value as null without asking the field.
    return [None if value is None else render(value) for value in map(read, rows)]


# A paginated list whose page is rendered by `representation` (of `serializer_class`, which
# the OpenAPI document still describes). A comment, not a docstring: drf-spectacular would
# publish a docstring as the description of every list inheriting it.
class RepresentedListView(generics.ListAPIView):
    representation: Representation

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(self.representation.many(page or []))
