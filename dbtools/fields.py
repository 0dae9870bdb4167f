"""A model's concrete fields and columns, typed as the statements built from them use them:
`_meta.get_field` may return a relation's reverse side and `Field.column` may be None, but
neither happens for the concrete columns a statement names."""

from typing import cast

from django.db import models


def concrete_field(model: type[models.Model], name: str) -> models.Field:
    field = model._meta.get_field(name)
    if not isinstance(field, models.Field) or field.column is None:
        raise TypeError(f"{model.__name__}.{name} is not a concrete field")
    return field


def max_length(model: type[models.Model], name: str) -> int:
    length = concrete_field(model, name).max_length
    if length is None:
        raise TypeError(f"{model.__name__}.{name} has no maximum length")
    return length


def column_of(field: models.Field) -> str:
    return cast(str, field.column)
