"""Values made ready for the database at the cost of a type check, for statements that write
many rows at once (the tick's write-back and delivery log, `dbtools.compiled.insert_rows`).

`Field.get_db_prep_save` walks several methods per value (`get_prep_value`, `to_python`,
the backend's adapter) and, for a value that is already what the driver takes, returns it
unchanged: on PostgreSQL that is a `str` for a text column, a `UUID` for a uuid, an aware
`datetime` for a timestamptz, a `bool`, and None; an `int` it wraps in the integer type of
its column (psycopg's `Int4` and kin). For a burst
of thousands of rows those walks were a tenth of the tick's CPU. `preparer` returns a
function that passes such values through and hands every other value (a naive datetime,
an enum member, a dict for a JSON column, anything on SQLite) to `get_db_prep_save`
itself, so what reaches the database is what Django would have sent
(tests/dbtools/test_values.py holds the two to the same results).
"""

from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any
from uuid import UUID

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper

# The field classes whose get_db_prep_save returns a value of these exact types unchanged
# on PostgreSQL (subclasses included: EmailField is a CharField).
_PASSED_THROUGH: tuple[tuple[type[models.Field], tuple[type, ...]], ...] = (
    (models.CharField, (str,)),
    (models.TextField, (str,)),
    (models.UUIDField, (UUID,)),
    (models.BooleanField, (bool,)),
)


def preparer(field: models.Field, connection: BaseDatabaseWrapper) -> Callable[[Any], Any]:
    """A function giving what `field.get_db_prep_save(value, connection)` gives, faster for
    the values the driver takes as they are."""
    prepare = partial(field.get_db_prep_save, connection=connection)
    if connection.vendor != "postgresql":
        return prepare
    target = field.target_field if isinstance(field, models.ForeignKey) else field
    if type(target) is models.DateTimeField:
        return partial(_aware_or, prepare)
    if isinstance(target, models.IntegerField):
        # psycopg's Int2/Int4/Int8, by the field's internal type (PostgreSQL's operations).
        types = getattr(connection.ops, "integerfield_type_map", {})
        integer_type = types.get(target.get_internal_type())
        if integer_type is not None:
            return partial(_integer_or, integer_type, prepare)
    for field_class, types in _PASSED_THROUGH:
        if isinstance(target, field_class):
            return partial(_typed_or, frozenset(types), prepare)
    return prepare


def _typed_or(types: frozenset[type], prepare: Callable[[Any], Any], value: Any) -> Any:
    if value is None or type(value) in types:
        return value
    return prepare(value)


def _integer_or(integer_type: type, prepare: Callable[[Any], Any], value: Any) -> Any:
    if value is None:
        return value
    if type(value) is int:
        return integer_type(value)
    return prepare(value)


def _aware_or(prepare: Callable[[Any], Any], value: Any) -> Any:
    # A naive datetime is made aware (with a warning) by Django: leave that to it.
    if value is None or (type(value) is datetime and value.tzinfo is not None):
        return value
    return prepare(value)
