"""Claims with leases and fencing tokens: the one mechanism run_tick and consume_jobs share.

A queue table has `claimed_until` (the lease) and `claim_token` (the fence). A claim is ONE
statement that picks ready rows, sets `claimed_until = now + lease`, increments
`claim_token` and returns the claimed rows — token included — from that same statement, so
no later read can see a newer claimant's token. On PostgreSQL the pick is
`FOR UPDATE SKIP LOCKED`, so concurrent claimers take disjoint rows without waiting; on
SQLite the statement runs under the single writer lock, which gives the same guarantee.

Every write-back is conditional on `(pk, claim_token)` and clears `claimed_until`; zero rows
changed means the row was reclaimed after our lease ran out ("fenced out") and the stale
outcome must be dropped.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.db import connection, models

M = TypeVar("M", bound=models.Model)


@dataclass(frozen=True)
class ClaimSpec:
    """What makes a row of `model` claimable, as SQL over its own columns.

    `ready_sql` may use `%(now)s`; `order_by` is a column list; `extra_assignments` are
    further `column = expression` pieces applied by the claim (e.g. counting an attempt).
    """

    model: type[models.Model]
    ready_sql: str
    order_by: str
    extra_assignments: str = ""


def claim(
    spec: ClaimSpec, *, now: datetime, lease: timedelta, limit: int, params: dict[str, Any]
) -> list[Any]:
    """Claim up to `limit` ready rows (oldest by `order_by`) and return them as model
    instances, in no particular order.

    The returned instances carry the new `claim_token` and `claimed_until`; a row another
    claimer took first is simply not returned.
    """
    if limit <= 0:
        return []
    table = connection.ops.quote_name(spec.model._meta.db_table)
    pk = connection.ops.quote_name(spec.model._meta.pk.column)
    assignments = "claimed_until = %(lease_until)s, claim_token = claim_token + 1"
    if spec.extra_assignments:
        assignments += ", " + spec.extra_assignments
    if connection.vendor == "postgresql":
        sql = (
            f"WITH picked AS (SELECT {pk} FROM {table} WHERE {spec.ready_sql} "
            f"ORDER BY {spec.order_by} LIMIT %(limit)s FOR UPDATE SKIP LOCKED) "
            f"UPDATE {table} AS claimed SET {assignments} FROM picked "
            f"WHERE claimed.{pk} = picked.{pk} RETURNING claimed.*"
        )
    else:
        sql = (
            f"UPDATE {table} SET {assignments} WHERE {pk} IN (SELECT {pk} FROM {table} "
            f"WHERE {spec.ready_sql} ORDER BY {spec.order_by} LIMIT %(limit)s) RETURNING *"
        )
    bound = {**params, "now": now, "lease_until": now + lease, "limit": limit}
    rows = list(spec.model._default_manager.raw(sql, _adapt(bound)))
    return rows


def _adapt(params: dict[str, Any]) -> dict[str, Any]:
    """Datetimes as the backend stores them (SQLite keeps text in its own format)."""
    return {
        key: connection.ops.adapt_datetimefield_value(value)
        if isinstance(value, datetime)
        else value
        for key, value in params.items()
    }


def fenced_update(model: type[M], *, pk: Any, token: int, **changes: Any) -> bool:
    """Apply `changes` and release the lease, only if our claim is still the latest one."""
    updated = model._default_manager.filter(pk=pk, claim_token=token).update(
        claimed_until=None, **changes
    )
    return updated == 1


def fenced_delete(model: type[M], *, pk: Any, token: int) -> bool:
    """Delete the row only if our claim is still the latest one."""
    deleted, _ = model._default_manager.filter(pk=pk, claim_token=token).delete()
    return deleted > 0


def fenced_delete_many(model: type[M], claims: Iterable[tuple[Any, int]]) -> set[Any]:
    """Delete several claimed rows in one statement; returns the pks actually deleted
    (the others were fenced out)."""
    pairs = list(claims)
    if not pairs:
        return set()
    pk_field = model._meta.pk
    table = connection.ops.quote_name(model._meta.db_table)
    pk = connection.ops.quote_name(pk_field.column)
    condition = " OR ".join([f"({pk} = %s AND claim_token = %s)"] * len(pairs))
    params: list[Any] = []
    for key, token in pairs:
        params.extend([pk_field.get_db_prep_value(key, connection), token])
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE {condition} RETURNING {pk}", params)
        return {pk_field.to_python(row[0]) for row in cursor.fetchall()}


def fenced_update_many(
    model: type[M], items: Sequence[tuple[Any, int, dict[str, Any]]]
) -> set[Any]:
    """Apply per-row `changes` to several claimed rows in one statement per shape of change
    (same set of columns), releasing their leases; returns the pks actually updated (the
    others were fenced out). A column whose value differs between rows becomes a CASE."""
    updated: set[Any] = set()
    shapes: dict[tuple[str, ...], list[tuple[Any, int, dict[str, Any]]]] = {}
    for item in items:
        shapes.setdefault(tuple(sorted(item[2])), []).append(item)
    for columns, group in shapes.items():
        updated |= _fenced_update_group(model, columns, group)
    return updated


def _fenced_update_group(
    model: type[M], columns: tuple[str, ...], group: list[tuple[Any, int, dict[str, Any]]]
) -> set[Any]:
    meta, quote = model._meta, connection.ops.quote_name
    pk_field = meta.pk
    keys = [pk_field.get_db_prep_value(key, connection) for key, _, _ in group]
    assignments, params = ["claimed_until = NULL"], []
    for name in columns:
        field = meta.get_field(name)
        values = [field.get_db_prep_save(changes[name], connection) for _, _, changes in group]
        # PostgreSQL types a CASE from its branches, so NULLs and text need the column type.
        cast = f"CAST(%s AS {field.cast_db_type(connection)})"
        slot = cast if connection.vendor == "postgresql" else "%s"
        if all(value == values[0] for value in values):
            assignments.append(f"{quote(field.column)} = {slot}")
            params.append(values[0])
            continue
        whens = " ".join([f"WHEN %s THEN {slot}"] * len(group))
        assignments.append(f"{quote(field.column)} = CASE {quote(pk_field.column)} {whens} END")
        for key, value in zip(keys, values, strict=True):
            params.extend([key, value])
    pk = quote(pk_field.column)
    condition = " OR ".join([f"({pk} = %s AND claim_token = %s)"] * len(group))
    for key, (_, token, _) in zip(keys, group, strict=True):
        params.extend([key, token])
    table = quote(meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET {', '.join(assignments)} WHERE {condition} RETURNING {pk}",
            params,
        )
        return {pk_field.to_python(row[0]) for row in cursor.fetchall()}
