"""Hot statements compiled once: a queryset run with new values each time, and inserts of
new rows that must land together.

Compiling a queryset costs more than running a small indexed query: for the token lookup
that every API request makes (four tables joined by select_related) Django's compiler took
more time than the rest of the lookup. `CompiledQuery` compiles the queryset once and binds
each run's values into the same SQL text; the rows come back as the model instances the
queryset itself would give (select_related objects and annotations included), through
Django's own converters and populators.

The values that change between runs are written as `Param(name, field)` in the queryset;
everything else in it is fixed when it is first compiled. A `values_list(..., named=True)`
queryset runs the same way and gives its named rows: a list page reads only the columns it
shows, without a model instance per row.

`insert_together` inserts new rows all or none with INSERT statements built once per model:
on PostgreSQL as one statement (data-modifying WITH), so a create of three rows is one round
trip instead of five (BEGIN, three INSERTs, COMMIT). `insert_rows` inserts many new rows of
one model in multi-row statements, values made ready by `dbtools.values.preparer`.

`dbtools.pages.CompiledPages` does the same for a list endpoint's cursor-paginated query.

What is compiled for a connection is kept on that connection object (`_compiled_on`) and
goes with it: its converters and value preparers are bound to the connection, so a cache
held anywhere else, even one keyed weakly by connection, would keep alive every connection
the process ever opened (the tick's database thread opens one per tick).
"""

import dataclasses
import json
import weakref
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Generic, TypeVar, cast

import django
from django.db import DEFAULT_DB_ALIAS, connections, models, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.expressions import Expression
from django.db.models.query import NamedValuesListIterable, get_related_populators
from django.db.models.sql import Query
from django.db.models.utils import create_namedtuple_class

from dbtools.fields import column_of
from dbtools.instances import loaded
from dbtools.values import preparer

M = TypeVar("M", bound=models.Model)


@dataclass(frozen=True)
class _Slot:
    """Where a Param's value goes among a compiled statement's parameters."""

    name: str
    field: models.Field

    def bind(self, values: Mapping[str, Any], connection: BaseDatabaseWrapper) -> Any:
        return self.field.get_db_prep_value(values[self.name], connection, prepared=False)


@dataclass(frozen=True)
class _ListSlot(_Slot):
    """Where an AmongParams list goes: one parameter, however many values (an array on
    PostgreSQL, a JSON list for SQLite's json_each)."""

    def bind(self, values: Mapping[str, Any], connection: BaseDatabaseWrapper) -> Any:
        prepared = [
            self.field.get_db_prep_value(value, connection, prepared=False)
            for value in values[self.name]
        ]
        if connection.vendor == "postgresql":
            return prepared
        return json.dumps(prepared)


class Param(Expression):
    """A value of a compiled statement given at each run: `filter(prefix=Param("prefix",
    CharField()))`. `field` prepares the value for the database as a model field would."""

    def __init__(self, name: str, field: models.Field) -> None:
        super().__init__(output_field=field)
        self.name = name

    # The stubs type a parameter as str | int; the compiler passes on any value, here the
    # slot that bind() fills at each run.
    def as_sql(  # type: ignore[override]
        self, compiler: Any, connection: BaseDatabaseWrapper
    ) -> tuple[str, list]:
        return "%s", [_Slot(self.name, self.output_field)]


class AmongParams(Expression):
    """True where `field_name` is not NULL and among the values of the list given at each
    run as `name` (a sequence of values `field` prepares): one parameter however many
    values, so a statement naming 2,000 values compiles and plans like one naming 2, and
    PostgreSQL looks each row up in a hash of the array (a constant once bound) instead of
    testing 2,000 alternatives."""

    def __init__(self, field_name: str, name: str, field: models.Field) -> None:
        super().__init__(output_field=models.BooleanField())
        self.lhs: Any = models.F(field_name)
        self.slot = _ListSlot(name, field)

    def get_source_expressions(self) -> list[Any]:
        return [self.lhs]

    def set_source_expressions(self, exprs: Sequence[Any]) -> None:
        (self.lhs,) = exprs

    def as_sql(  # type: ignore[override]
        self, compiler: Any, connection: BaseDatabaseWrapper
    ) -> tuple[str, list]:
        lhs, lhs_params = compiler.compile(self.lhs)
        if connection.vendor == "postgresql":
            among = f"{lhs} = ANY(%s)"
        else:
            among = f"{lhs} IN (SELECT value FROM json_each(%s))"
        return f"({lhs} IS NOT NULL AND {among})", [*lhs_params, *lhs_params, self.slot]


def bind(
    params: Sequence[Any], values: Mapping[str, Any], connection: BaseDatabaseWrapper
) -> list[Any]:
    """A compiled statement's parameters with each Param's value for this run put in."""
    return [p.bind(values, connection) if isinstance(p, _Slot) else p for p in params]


@dataclass(frozen=True)
class _Plan:
    sql: str
    params: tuple[Any, ...]
    converters: dict[int, tuple[list[Callable], Any]]
    model: type[models.Model]
    fields: slice
    attnames: list[str]
    populators: list[Any]
    annotations: dict[str, int]

    @classmethod
    def compile(cls, queryset: models.QuerySet, connection: BaseDatabaseWrapper) -> "_Plan":
        compiler = queryset.query.get_compiler(connection=connection)
        sql, params = compiler.as_sql()  # also fills compiler.select and klass_info
        select, klass_info = compiler.select, compiler.klass_info
        first, last = klass_info["select_fields"][0], klass_info["select_fields"][-1]
        return cls(
            sql=sql,
            params=tuple(params),
            converters=compiler.get_converters([column for column, _, _ in select]),
            model=klass_info["model"],
            fields=slice(first, last + 1),
            attnames=[column.target.attname for column, _, _ in select[first : last + 1]],
            populators=_related_populators(queryset, klass_info, select, connection.alias),
            annotations=dict(compiler.annotation_col_map or {}),
        )

    def result(self, row: list[Any], connection: BaseDatabaseWrapper) -> models.Model:
        _convert(row, self.converters, connection)
        obj = self.model.from_db(connection.alias, self.attnames, row[self.fields])
        for populator in self.populators:
            populator.populate(row, obj)
        for name, position in self.annotations.items():
            setattr(obj, name, row[position])
        return obj


@dataclass(frozen=True)
class _RowsPlan:
    """A `values_list(..., named=True)` queryset's statement and the class of its rows."""

    sql: str
    params: tuple[Any, ...]
    converters: dict[int, tuple[list[Callable], Any]]
    row: type[tuple]

    @classmethod
    def compile(cls, queryset: models.QuerySet, connection: BaseDatabaseWrapper) -> "_RowsPlan":
        query = queryset.query
        compiler = query.get_compiler(connection=connection)
        sql, params = compiler.as_sql()
        # Named as NamedValuesListIterable names them; the columns come in that order.
        names = queryset._fields or [  # type: ignore[attr-defined]
            *query.extra_select,
            *query.values_select,
            *query.annotation_select,
        ]
        return cls(
            sql=sql,
            params=tuple(params),
            converters=compiler.get_converters([column for column, _, _ in compiler.select]),
            row=create_namedtuple_class(*names),
        )

    def result(self, row: list[Any], connection: BaseDatabaseWrapper) -> tuple:
        _convert(row, self.converters, connection)
        return tuple.__new__(self.row, row)


def _related_populators(
    queryset: models.QuerySet, klass_info: dict, select: list, alias: str
) -> list[Any]:
    """What fills a row's select_related objects, as the queryset's own iterable makes them.
    Django 6.1 gives them the queryset's fetch mode (what a missing field loads); a mode
    that tracks an instance's peers needs the queryset's own iterable."""
    if django.VERSION < (6, 1):
        return get_related_populators(klass_info, select, alias)  # type: ignore[call-arg]
    fetch_mode = queryset._fetch_mode  # type: ignore[attr-defined]
    if fetch_mode.track_peers:
        raise TypeError("CompiledQuery does not track peers: use the default fetch mode")
    return get_related_populators(klass_info, select, alias, fetch_mode)


def _convert(
    row: list[Any],
    converters: dict[int, tuple[list[Callable], Any]],
    connection: BaseDatabaseWrapper,
) -> None:
    """The row's values as the model fields give them (Django's from_db_value converters)."""
    for position, (column_converters, expression) in converters.items():
        value = row[position]
        for converter in column_converters:
            value = converter(value, expression, connection)
        row[position] = value


def _compile(queryset: models.QuerySet, connection: BaseDatabaseWrapper) -> _Plan | _RowsPlan:
    if queryset._iterable_class is NamedValuesListIterable:
        return _RowsPlan.compile(queryset, connection)
    if queryset._fields is not None:  # type: ignore[attr-defined]
        raise TypeError("CompiledQuery takes model rows or values_list(..., named=True)")
    return _Plan.compile(queryset, connection)


class CompiledQuery(Generic[M]):
    """`build()` returns the queryset (slice it for a LIMIT); `run(**values)` executes it
    with the values of its Params and returns its instances (or its named rows), one
    statement per run."""

    def __init__(self, build: Callable[[], models.QuerySet[M]]) -> None:
        self._build = build

    def run(self, using: str = DEFAULT_DB_ALIAS, **values: Any) -> list[M]:
        connection = connections[using]
        # One plan per connection object: converters belong to their connection, and each
        # thread has its own.
        plans = _compiled_on(connection).plans
        plan = plans.get(self)
        if plan is None:
            plan = plans[self] = _compile(self._build(), connection)
        with connection.cursor() as cursor:
            cursor.execute(plan.sql, bind(plan.params, values, connection))
            rows = cursor.fetchall()
        return [cast(M, plan.result(list(row), connection)) for row in rows]


@dataclass(frozen=True)
class _Insert:
    """A model's INSERT: its columns (the auto-increment key left to the database), how
    their values are read off an instance (its attributes, in one `attrgetter`, and
    `pre_save` for the fields whose `pre_save` does more than read, such as auto_now) and
    how each is made ready for the database (`dbtools.values.preparer`)."""

    table: str
    columns: str
    fields: tuple[models.Field, ...]
    read: Callable[[models.Model], tuple[Any, ...]]
    pre_saved: tuple[tuple[int, models.Field], ...]
    prepare: tuple[Callable[[Any], Any], ...]
    # PostgreSQL: the rows as one array parameter per column (`insert_rows`).
    unnest_sql: str = ""

    @classmethod
    def of(cls, model: type[models.Model], connection: BaseDatabaseWrapper) -> "_Insert":
        meta = model._meta
        fields = tuple(
            field
            for field in meta.concrete_fields
            if not field.generated and not (field.primary_key and field.db_returning)
        )
        quote = connection.ops.quote_name
        names = [field.attname for field in fields]
        # attrgetter of one name gives the value itself, of two or more a tuple.
        read = attrgetter(*names) if len(names) > 1 else lambda obj: (getattr(obj, names[0]),)
        table, columns = quote(meta.db_table), ", ".join(quote(column_of(f)) for f in fields)
        unnest_sql = ""
        if connection.vendor == "postgresql":
            # Binary arrays (`%b`): psycopg builds a text array element by element in Python,
            # with a quoting check each, several times slower.
            arrays = ", ".join(f"%b::{field.cast_db_type(connection)}[]" for field in fields)
            unnest_sql = f"INSERT INTO {table} ({columns}) SELECT * FROM unnest({arrays})"
        return cls(
            table=table,
            columns=columns,
            fields=fields,
            read=read,
            pre_saved=tuple(
                (index, field) for index, field in enumerate(fields) if not _plain_pre_save(field)
            ),
            prepare=tuple(preparer(field, connection) for field in fields),
            unnest_sql=unnest_sql,
        )

    def sql(self, rows: int = 1) -> str:
        row = f"({', '.join(['%s'] * len(self.fields))})"
        return f"INSERT INTO {self.table} ({self.columns}) VALUES {', '.join([row] * rows)}"

    def params(self, obj: models.Model) -> list[Any]:
        values = list(self.read(obj))
        for index, field in self.pre_saved:
            values[index] = field.pre_save(obj, add=True)
        return [prepare(value) for prepare, value in zip(self.prepare, values, strict=True)]


def _plain_pre_save(field: models.Field) -> bool:
    """Whether the field's `pre_save` on an insert only reads its attribute."""
    if isinstance(field, models.DateField):  # DateTimeField too
        return not (field.auto_now or field.auto_now_add)
    return type(field).pre_save is models.Field.pre_save


def _insert_of(model: type[models.Model], connection: BaseDatabaseWrapper) -> _Insert:
    inserts = _compiled_on(connection).inserts
    insert = inserts.get(model)
    if insert is None:
        insert = inserts[model] = _Insert.of(model, connection)
    return insert


def insert_together(objs: list[models.Model], using: str = DEFAULT_DB_ALIAS) -> None:
    """INSERT new model instances in order, all or none: one statement on PostgreSQL, one
    per row inside a transaction elsewhere (a savepoint inside the caller's transaction,
    which a failed insert therefore leaves usable, as an atomic block would).

    Like `Model.save(force_insert=True)` without its signals (nothing here listens to
    them): field defaults and `pre_save` apply; an auto-increment key is left to the
    database and not read back.
    """
    connection = connections[using]
    statements = []
    for obj in objs:
        insert = _insert_of(type(obj), connection)
        params = insert.params(obj)
        for field, value in zip(insert.fields, params, strict=True):
            if hasattr(value, "resolve_expression"):
                raise TypeError(f"{field} is an expression: insert_together takes plain values")
        statements.append((insert.sql(), params))
    if connection.vendor == "postgresql" and len(statements) > 1:
        *first, (last_sql, last_params) = statements
        ctes = ", ".join(f"i{index} AS ({sql})" for index, (sql, _) in enumerate(first))
        params = [value for _, values in first for value in values] + last_params
        statements = [(f"WITH {ctes} {last_sql}", params)]
    # One statement outside a transaction is atomic by itself: no BEGIN and COMMIT to send.
    alone = len(statements) == 1 and not connection.in_atomic_block
    with nullcontext() if alone else transaction.atomic(using=using), connection.cursor() as cursor:
        for sql, params in statements:
            cursor.execute(sql, params)
    _mark_saved(objs, using)


def insert_one(obj: models.Model, using: str = DEFAULT_DB_ALIAS) -> None:
    """INSERT one new model instance: one statement, in the caller's transaction if there is
    one (no savepoint: a failed insert breaks that transaction, as `Model.save` does), else
    atomic by itself. What `insert_together([obj])` writes, one round trip in either case."""
    connection = connections[using]
    insert = _insert_of(type(obj), connection)
    with connection.cursor() as cursor:
        cursor.execute(insert.sql(), insert.params(obj))
    _mark_saved([obj], using)


def insert_rows(model: type[M], objs: Sequence[M], *, using: str = DEFAULT_DB_ALIAS) -> None:
    """INSERT new instances of one model together: `bulk_create` for a hot path's plain
    rows (the tick's delivery log), at a fraction of its CPU. On PostgreSQL one statement
    of one array per column (`unnest`), whose text is the same for any number of rows, so
    psycopg parses it once; elsewhere multi-row VALUES in batches the backend allows.
    Field defaults and `pre_save` apply; values must be plain (no expressions); an
    auto-increment key is left to the database and not read back; no signals. Atomic only
    inside the caller's transaction, as bulk_create in batches is."""
    if not objs:
        return
    connection = connections[using]
    insert = _insert_of(model, connection)
    rows = [insert.params(obj) for obj in objs]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(insert.unnest_sql, [list(column) for column in zip(*rows, strict=True)])
        else:
            batch = max(1, connection.ops.bulk_batch_size(list(insert.fields), list(objs)))
            for start in range(0, len(rows), batch):
                chunk = rows[start : start + batch]
                cursor.execute(insert.sql(len(chunk)), [value for row in chunk for value in row])
    _mark_saved(objs, using)


def _mark_saved(objs: Sequence[models.Model], using: str) -> None:
    for obj in objs:
        obj._state.adding, obj._state.db = False, using


@dataclass(frozen=True)
class _RawColumns:
    """How a raw statement's columns become instances of a model: which are its fields
    (by attname) and which are extra (set as attributes), and their converters."""

    attnames: tuple[str, ...]
    fields: tuple[int, ...]
    extras: tuple[tuple[str, int], ...]
    converters: dict[int, tuple[list[Callable], Any]]

    @classmethod
    def of(
        cls, model: type[models.Model], names: tuple[str, ...], connection: BaseDatabaseWrapper
    ) -> "_RawColumns":
        by_column = {column_of(field): field for field in model._meta.concrete_fields}
        fields = [by_column.get(name) for name in names]
        compiler = connection.ops.compiler("SQLCompiler")(
            Query(model), connection, connection.alias
        )
        table = model._meta.db_table
        columns = [field.get_col(table) if field else None for field in fields]
        return cls(
            attnames=tuple(field.attname for field in fields if field is not None),
            fields=tuple(index for index, field in enumerate(fields) if field is not None),
            extras=tuple((name, i) for i, name in enumerate(names) if fields[i] is None),
            converters=compiler.get_converters(columns),  # type: ignore[arg-type]
        )

    def instance(self, model: type[M], row: list[Any], connection: BaseDatabaseWrapper) -> M:
        _convert(row, self.converters, connection)
        obj = loaded(model, self.attnames, [row[i] for i in self.fields], connection.alias)
        for name, position in self.extras:
            setattr(obj, name, row[position])
        return obj


def raw_instances(
    model: type[M], sql: str, params: Sequence[Any], using: str = DEFAULT_DB_ALIAS
) -> list[M]:
    """`model._default_manager.raw(sql, params)` as a list, for a hot path: columns that are
    none of the model's fields come as attributes, as there; how the columns map and
    convert is worked out once per model and set of columns, and the instances are made
    without `Model.__init__` (`dbtools.instances.loaded`)."""
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        names = tuple(column[0] for column in cursor.description)
        rows = cursor.fetchall()
    known = _compiled_on(connection).raw
    columns = known.get((model, names))
    if columns is None:
        columns = known[(model, names)] = _RawColumns.of(model, names, connection)
    return [columns.instance(model, list(row), connection) for row in rows]


@dataclass
class _Compiled:
    """What this module compiled for one connection: each CompiledQuery's plan (kept while
    the CompiledQuery itself lives: a list's rare page shapes are compiled for one request),
    each model's INSERT and each raw statement's columns."""

    plans: "weakref.WeakKeyDictionary[CompiledQuery[Any], _Plan | _RowsPlan]" = dataclasses.field(
        default_factory=weakref.WeakKeyDictionary
    )
    inserts: dict[type, _Insert] = dataclasses.field(default_factory=dict)
    raw: dict[tuple, _RawColumns] = dataclasses.field(default_factory=dict)


_ON_CONNECTION = "_dbtools_compiled"


def _compiled_on(connection: BaseDatabaseWrapper) -> _Compiled:
    """What was compiled for `connection`, an attribute of the connection object: it lives
    and dies with it (see the module docstring)."""
    compiled = getattr(connection, _ON_CONNECTION, None)
    if compiled is None:
        compiled = _Compiled()
        setattr(connection, _ON_CONNECTION, compiled)
    return compiled
