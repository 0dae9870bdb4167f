"""Fences: every write to a claimed row is conditional on the claim that took it.

Every write-back is conditional on `(pk, claim_token)` and clears `claimed_until`; zero rows
changed means the row was reclaimed after our lease ran out ("fenced out") and the stale
outcome must be dropped. A change made outside a claim (a support retry, an edit) goes
through `guarded_update`, which refuses a row under a running lease and bumps the token so
that a worker whose lease ran out cannot overwrite it afterwards.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar, cast

from django.db import DEFAULT_DB_ALIAS, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper

from dbqueue.leases import lease_free
from dbtools.fields import column_of, concrete_field
from dbtools.values import preparer

M = TypeVar("M", bound=models.Model)


def fenced_update(model: type[M], *, pk: Any, token: int, **changes: Any) -> bool:
    """Apply `changes` and release the lease, only if our claim is still the latest one."""
    updated = model._default_manager.filter(pk=pk, claim_token=token).update(
        claimed_until=None, **changes
    )
    return updated == 1


def fenced_update_many(
    model: type[M], items: Sequence[tuple[Any, int, dict[str, Any]]], *, release: bool = True
) -> set[Any]:
    """Apply per-row `changes` to several claimed rows in one statement per shape of change
    (same set of columns), releasing their leases (with `release=False`, a write while the
    work goes on: the leases stay); returns the pks actually updated (the others were
    fenced out). A column whose value differs between rows becomes a CASE."""
    updated: set[Any] = set()
    shapes: dict[tuple[str, ...], list[tuple[Any, int, dict[str, Any]]]] = {}
    for item in items:
        shapes.setdefault(tuple(sorted(item[2])), []).append(item)
    for columns, group in shapes.items():
        updated |= _fenced_update_group(model, columns, group, release=release)
    return updated


def _fenced_update_group(
    model: type[M],
    columns: tuple[str, ...],
    group: list[tuple[Any, int, dict[str, Any]]],
    *,
    release: bool,
) -> set[Any]:
    connection = connections[DEFAULT_DB_ALIAS]
    pk_field = cast(models.Field, model._meta.pk)
    prepare_key = preparer(pk_field, connection)
    change = _GroupChange(
        keys=[prepare_key(key) for key, _, _ in group],
        tokens=[token for _, token, _ in group],
        release=release,
    )
    for name in columns:
        field_ = concrete_field(model, name)
        prepare = preparer(field_, connection)
        first = group[0][2][name]
        # Most columns of a write-back hold one value for every row (the time, a state):
        # compared before they are prepared, they are prepared once.
        if all(changes[name] == first for _, _, changes in group):
            change.same.append((field_, prepare(first)))
        else:
            values = [prepare(changes[name]) for _, _, changes in group]
            change.varying.append((field_, values))
    build = _unnest_update if connection.vendor == "postgresql" else _case_update
    sql, params = build(model, connection, change)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {pk_field.to_python(row[0]) for row in cursor.fetchall()}


@dataclass
class _GroupChange:
    """One shape of change, prepared: the rows' keys and tokens, the columns holding one
    value for every row and those that differ (a value per row, in the rows' order)."""

    keys: list[Any]
    tokens: list[int]
    release: bool
    same: list[tuple[models.Field, Any]] = field(default_factory=list)
    varying: list[tuple[models.Field, list[Any]]] = field(default_factory=list)


def _unnest_update(
    model: type[M], connection: BaseDatabaseWrapper, change: "_GroupChange"
) -> tuple[str, list[Any]]:
    """PostgreSQL: the rows' keys, tokens and differing values as one array each, joined
    to the table: a statement whose text depends only on which columns change, so psycopg
    parses it once rather than once per batch, and a few parameters however many rows. The
    arrays go in binary (`%b`): psycopg builds a text array element by element in Python,
    with a quoting check each, several times slower."""
    quote, table = connection.ops.quote_name, _quoted_table(model, connection)
    pk_field = cast(models.Field, model._meta.pk)
    token_field = concrete_field(model, "claim_token")
    assignments = ["claimed_until = NULL"] if change.release else []
    params: list[Any] = []
    for field_, value in change.same:
        typed = f"CAST(%s AS {field_.cast_db_type(connection)})"
        assignments.append(f"{quote(column_of(field_))} = {typed}")
        params.append(value)
    arrays = [f"%b::{f.cast_db_type(connection)}[]" for f in (pk_field, token_field)]
    array_params: list[Any] = [change.keys, change.tokens]
    for index, (field_, values) in enumerate(change.varying):
        assignments.append(f"{quote(column_of(field_))} = v.c{index}")
        arrays.append(f"%b::{field_.cast_db_type(connection)}[]")
        array_params.append(values)
    names = ", ".join(["k", "t", *(f"c{index}" for index in range(len(change.varying)))])
    pk = f"{table}.{quote(column_of(pk_field))}"
    sql = (
        f"UPDATE {table} SET {', '.join(assignments)} "
        f"FROM unnest({', '.join(arrays)}) AS v({names}) "
        f"WHERE {pk} = v.k AND {table}.claim_token = v.t RETURNING {pk}"
    )
    return sql, [*params, *array_params]


def _case_update(
    model: type[M], connection: BaseDatabaseWrapper, change: "_GroupChange"
) -> tuple[str, list[Any]]:
    """Elsewhere (SQLite): the rows by key and token, a differing column as a CASE."""
    quote, table = connection.ops.quote_name, _quoted_table(model, connection)
    pk = quote(column_of(cast(models.Field, model._meta.pk)))
    assignments = ["claimed_until = NULL"] if change.release else []
    params: list[Any] = []
    for field_, value in change.same:
        assignments.append(f"{quote(column_of(field_))} = %s")
        params.append(value)
    for field_, values in change.varying:
        whens = " ".join(["WHEN %s THEN %s"] * len(change.keys))
        assignments.append(f"{quote(column_of(field_))} = CASE {pk} {whens} END")
        for key, value in zip(change.keys, values, strict=True):
            params.extend([key, value])
    condition = " OR ".join([f"({pk} = %s AND claim_token = %s)"] * len(change.keys))
    for key, token in zip(change.keys, change.tokens, strict=True):
        params.extend([key, token])
    sql = f"UPDATE {table} SET {', '.join(assignments)} WHERE {condition} RETURNING {pk}"
    return sql, params


def _quoted_table(model: type[models.Model], connection: BaseDatabaseWrapper) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def guarded_update(rows: models.QuerySet, *, token: int, now: datetime, **values: Any) -> bool:
    """Write `values` to the row in `rows` (one row, already scoped by its caller: pk,
    tenant, state) unless a lease is running on it or it was claimed since it was read with
    `token`. Bumps the claim token, so a worker whose lease ran out before this write
    cannot overwrite it afterwards: its fenced write-back now matches no row. False when
    nothing was written (claimed, re-claimed, gone, or not in the expected state)."""
    written = (
        rows.filter(claim_token=token)
        .filter(lease_free(now=now))
        .update(claim_token=models.F("claim_token") + 1, **values)
    )
    return written == 1
