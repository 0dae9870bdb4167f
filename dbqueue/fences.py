"""Fences: every write to a claimed row is conditional on the claim that took it.

Every write-back is conditional on `(pk, claim_token)` and clears `claimed_until`; zero rows
changed means the row was reclaimed after our lease ran out ("fenced out") and the stale
outcome must be dropped. A change made outside a claim (a support retry, an edit) goes
through `guarded_update`, which refuses a row under a running lease and bumps the token so
that a worker whose lease ran out cannot overwrite it afterwards.
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

from django.db import connection, models

from dbqueue.leases import lease_free
from dbtools.fields import column_of, concrete_field

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
    meta, quote = model._meta, connection.ops.quote_name
    pk_field = cast(models.Field, meta.pk)
    keys = [pk_field.get_db_prep_value(key, connection) for key, _, _ in group]
    assignments: list[str] = ["claimed_until = NULL"] if release else []
    params: list[Any] = []
    for name in columns:
        field_ = concrete_field(model, name)
        values = [field_.get_db_prep_save(changes[name], connection) for _, _, changes in group]
        # PostgreSQL types a CASE from its branches, so NULLs and text need the column type.
        typed = f"CAST(%s AS {field_.cast_db_type(connection)})"
        slot = typed if connection.vendor == "postgresql" else "%s"
        if all(value == values[0] for value in values):
            assignments.append(f"{quote(column_of(field_))} = {slot}")
            params.append(values[0])
            continue
        whens = " ".join([f"WHEN %s THEN {slot}"] * len(group))
        assignments.append(
            f"{quote(column_of(field_))} = CASE {quote(column_of(pk_field))} {whens} END"
        )
        for key, value in zip(keys, values, strict=True):
            params.extend([key, value])
    pk = quote(column_of(pk_field))
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
