"""Claims with leases and fencing tokens: the one mechanism every queue table shares.

A queue table has `claimed_until` (the lease) and `claim_token` (the fence). A claim is ONE
statement that picks ready rows, sets `claimed_until = now + lease`, increments
`claim_token` and returns the claimed rows — token included — from that same statement, so
no later read can see a newer claimant's token. Which rows are ready is the queue's own
queryset (`ClaimSpec.ready`), compiled into the claim: the predicate is written once. On
PostgreSQL the pick is `FOR UPDATE SKIP LOCKED`, so concurrent claimers take disjoint rows
without waiting; on SQLite the statement runs under the single writer lock, which gives the
same guarantee.

Claims are fair between the groups named by `ClaimSpec.fair_by` (the tenant): the ready rows
are ranked within their group by the claim order, and a batch takes every group's first row
before any group's second (round-robin, oldest first within a group), so one group's backlog
never delays another group's single row past the first batch.

A claim also says how many ready rows it ranked (`Claimed.candidates`): a claim that comes
back short while it ranked more rows than it took lost some of them to a concurrent claimer
(locked at that instant, or claimed since its snapshot), so rows are still due — only a
short claim that took every row it ranked found the queue drained.

Every write-back is conditional on `(pk, claim_token)` and clears `claimed_until`; zero rows
changed means the row was reclaimed after our lease ran out ("fenced out") and the stale
outcome must be dropped. A change made outside a claim (a support retry, an edit) goes
through `guarded_update`, which refuses a row under a running lease and bumps the token so
that a worker whose lease ran out cannot overwrite it afterwards.
"""

from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, TypeVar

from django.db import connection, models
from django.db.models.functions import RowNumber

from dbqueue.compiled import Param, bind
from dbqueue.leases import lease_free

M = TypeVar("M", bound=models.Model)

# How many ready rows a PostgreSQL claim ranks per row it takes; the rest cover rows that
# concurrent claimers hold locked, so up to OVERSAMPLE - 1 of them do not shrink a batch.
OVERSAMPLE = 4
# Compiled claim statements kept per process (one per queue and shape of claim).
COMPILED_MAX = 64


class Claimed(list):
    """The rows a claim took (model instances, in no particular order), and `candidates`:
    how many ready rows it ranked for them (at most OVERSAMPLE times the limit)."""

    def __init__(self, rows: list[Any], *, candidates: int) -> None:
        super().__init__(rows)
        self.candidates = candidates

    @property
    def drained(self) -> bool:
        """Every ready row the claim saw is among those it took: none is left for now
        (within the claim's skips and caps)."""
        return self.candidates <= len(self)


class ClaimValue(Enum):
    """Values a claim assigns that only the claim itself knows."""

    NOW = "now"
    LEASE_UNTIL = "lease_until"
    INCREMENT = "increment"


@dataclass(frozen=True)
class ClaimSpec:
    """How a queue claims: `ready(now)` is the queryset of claimable rows (one table, no
    joins; `now` is an expression standing for the claim time, so use it only inside the
    query), `order_by` the claim order within a group, `fair_by` the field whose groups
    take turns (round-robin), and `on_claim` further columns the claim sets (a value, or a
    ClaimValue). `capped_by` names the field whose values a claim may skip or cap (see
    `claim`); rows where it is NULL are neither."""

    ready: Callable[[Any], models.QuerySet]
    order_by: tuple[str, ...]
    fair_by: str
    on_claim: Mapping[str, Any] = field(default_factory=dict)
    capped_by: str | None = None


def claim(
    spec: ClaimSpec,
    *,
    now: datetime,
    lease: timedelta,
    limit: int,
    skip: Collection[Any] = (),
    cap: int | None = None,
    caps: Mapping[Any, int] | None = None,
) -> Claimed:
    """Claim up to `limit` ready rows (round-robin across `fair_by` groups, first by
    `order_by` within one) and return them as model instances, in no particular order.
    Rows whose `capped_by` value is in `skip` are left alone; at most `cap` rows of one
    value are taken (None: no cap), or `caps[value]` for the values it names.

    The returned instances carry the new `claim_token` and `claimed_until`; a row another
    claimer took first is simply not returned (but counted in `Claimed.candidates`).
    """
    if limit <= 0:
        return Claimed([], candidates=0)
    model, sql, params = claim_statement(
        spec, now=now, lease=lease, limit=limit, skip=skip, cap=cap, caps=caps
    )
    rows = list(model._default_manager.raw(sql, params))
    if connection.vendor != "postgresql":
        # One writer at a time: every row the claim ranked, it took.
        return Claimed(rows, candidates=len(rows))
    # The statement returns one row with no claimed row in it when it took none.
    candidates = rows[0].candidates if rows else 0
    return Claimed([row for row in rows if row.pk is not None], candidates=candidates)


def claim_statement(
    spec: ClaimSpec,
    *,
    now: datetime,
    lease: timedelta,
    limit: int,
    skip: Collection[Any] = (),
    cap: int | None = None,
    caps: Mapping[Any, int] | None = None,
) -> tuple[type[models.Model], str, list[Any]]:
    """The one statement `claim` runs, with its parameters (EXPLAIN it to see the plan).

    Compiling a queryset costs milliseconds of Python, so the compiled parts are kept per
    shape of claim (queue, vendor, ready predicate, how many values are skipped or capped)
    and only their parameters are bound per call."""
    caps = dict(caps or {})
    if (skip or caps or cap is not None) and spec.capped_by is None:
        raise ValueError("skip and cap need a ClaimSpec with capped_by")
    if caps and cap is None:
        raise ValueError("caps override a cap: give cap too")
    skip = list(skip)
    compiled = _compiled(spec, skipped=len(skip), capped=None if cap is None else len(caps))
    lease_until = now + lease
    model = compiled.model
    assignments, set_params = _assignments(
        model,
        {"claimed_until": lease_until, "claim_token": ClaimValue.INCREMENT, **spec.on_claim},
        now=now,
        lease_until=lease_until,
    )
    values: dict[str, Any] = {"now": now, "cap": cap}
    values.update((f"skip{i}", value) for i, value in enumerate(skip))
    for i, (value, most) in enumerate(caps.items()):
        values[f"cap_value{i}"], values[f"cap{i}"] = value, most
    table = connection.ops.quote_name(model._meta.db_table)
    pk = connection.ops.quote_name(model._meta.pk.column)
    if connection.vendor == "postgresql":
        sql = (
            f"WITH ranked AS ({compiled.ranked_sql}), "
            f"picked AS (SELECT {table}.{pk} FROM {table} "
            f"JOIN ranked ON ranked.{pk} = {table}.{pk} WHERE {compiled.where_sql} "
            f"ORDER BY ranked.fair_rank, {compiled.order_sql}, {table}.{pk} "
            f"LIMIT %s FOR UPDATE OF {table} SKIP LOCKED), "
            f"claimed AS (UPDATE {table} AS claimed SET {assignments} FROM picked "
            f"WHERE claimed.{pk} = picked.{pk} RETURNING claimed.*) "
            # The count comes back even when no row was claimed (one row of NULLs then).
            "SELECT claimed.*, counted.candidates FROM "
            "(SELECT count(*) AS candidates FROM ranked) AS counted "
            "LEFT JOIN claimed ON TRUE"
        )
        params = [
            *bind(compiled.ranked_params, values, connection),
            OVERSAMPLE * limit,
            *bind(compiled.where_params, values, connection),
            limit,
            *set_params,
        ]
        return model, sql, params
    # The single writer lock serialises claimers, so the ranking itself is the pick.
    sql = (
        f"UPDATE {table} SET {assignments} WHERE {pk} IN "
        f"(SELECT {pk} FROM ({compiled.ranked_sql}) AS ranked) RETURNING *"
    )
    return model, sql, [*set_params, *bind(compiled.ranked_params, values, connection), limit]


@dataclass(frozen=True)
class _Compiled:
    """The parts of a claim statement that Django compiles, with Param placeholders:
    the fair ranking (ending in `LIMIT %s`, bound to the rows it ranks) and, for
    PostgreSQL, the ready predicate and the claim order on the locked table."""

    model: type[models.Model]
    ranked_sql: str
    ranked_params: tuple[Any, ...]
    where_sql: str = ""
    where_params: tuple[Any, ...] = ()
    order_sql: str = ""


_COMPILED: "OrderedDict[tuple, _Compiled]" = OrderedDict()


def _compiled(spec: ClaimSpec, *, skipped: int, capped: int | None) -> _Compiled:
    """The compiled parts for this shape of claim, compiled on first use. `capped` is
    None without a cap, else how many values have their own cap. The key holds the ready
    predicate itself (its constants, e.g. a setting, included), so a different predicate
    is never served another's statement."""
    ready = spec.ready(Param("now", models.DateTimeField()))
    model = ready.model
    if skipped:
        target = _field(model, spec.capped_by)
        excluded = models.Q()
        for i in range(skipped):
            excluded |= models.Q(**{spec.capped_by: Param(f"skip{i}", target)})
        ready = ready.exclude(excluded)
    key = (
        connection.alias,
        connection.vendor,
        model,
        ready.query.where,
        spec.order_by,
        spec.fair_by,
        spec.capped_by,
        capped,
    )
    found = _COMPILED.get(key)
    if found is not None:
        _COMPILED.move_to_end(key)
        return found
    found = _compile(spec, ready, capped)
    _COMPILED[key] = found
    while len(_COMPILED) > COMPILED_MAX:
        _COMPILED.popitem(last=False)
    return found


def _field(model: type[models.Model], name: str) -> models.Field:
    """The field a value of `name` is compared with (a foreign key's target)."""
    field_ = model._meta.get_field(name)
    return field_.target_field if field_.is_relation else field_


def _compile(spec: ClaimSpec, ready: models.QuerySet, capped: int | None) -> _Compiled:
    model = ready.model
    ranked_sql, ranked_params = _ranked(spec, ready, capped).query.sql_with_params()
    # The ranking's row count is a parameter, so one statement serves every batch size.
    ranked_sql += " LIMIT %s"
    if connection.vendor != "postgresql":
        return _Compiled(model, ranked_sql, tuple(ranked_params))
    # Django keeps (unreferenced) aliases for joins it trimmed, e.g. for a negated lookup
    # on a nullable foreign key: only joins still in use count.
    joined = {alias for alias, uses in ready.query.alias_refcount.items() if uses}
    if joined - {model._meta.db_table}:
        raise ValueError("a claim's ready queryset must not join other tables")
    # The ready predicate again, on the locked table itself: a row another claimer committed
    # after our snapshot is re-checked in its new version (EvalPlanQual) and refused, where a
    # check on the ranked copy would let it be claimed twice.
    compiler = ready.query.get_compiler(connection=connection)
    where_sql, where_params = compiler.compile(ready.query.where)
    table = connection.ops.quote_name(model._meta.db_table)
    order = ", ".join(
        f"{table}.{connection.ops.quote_name(model._meta.get_field(name.lstrip('-')).column)}"
        + (" DESC" if name.startswith("-") else "")
        for name in spec.order_by
    )
    return _Compiled(model, ranked_sql, tuple(ranked_params), where_sql, tuple(where_params), order)


def _ranked(spec: ClaimSpec, ready: models.QuerySet, capped: int | None) -> models.QuerySet:
    """The ready rows in fair order: each row's rank within its group (1 = the group's
    first by `order_by`), then `order_by` among rows of equal rank; with a cap (`capped`
    values with their own), at most that many rows of one `capped_by` value."""
    order = [
        models.F(name[1:]).desc() if name.startswith("-") else models.F(name).asc()
        for name in spec.order_by
    ]
    pk = ready.model._meta.pk.name
    ranked = ready.annotate(
        fair_rank=models.Window(
            RowNumber(), partition_by=[models.F(spec.fair_by)], order_by=[*order, pk]
        )
    )
    if capped is not None:
        name = spec.capped_by
        integer, target = models.IntegerField(), _field(ready.model, name)
        most: Any = Param("cap", integer)
        if capped:
            whens = [
                models.When(
                    **{name: Param(f"cap_value{i}", target)}, then=Param(f"cap{i}", integer)
                )
                for i in range(capped)
            ]
            most = models.Case(*whens, default=most, output_field=integer)
        ranked = ranked.annotate(
            cap_rank=models.Window(
                RowNumber(), partition_by=[models.F(name)], order_by=[*order, pk]
            )
        ).filter(models.Q(cap_rank__lte=most) | models.Q(**{f"{name}__isnull": True}))
    return ranked.order_by("fair_rank", *spec.order_by, pk).values(pk, "fair_rank")


def _assignments(
    model: type[models.Model], values: Mapping[str, Any], *, now: datetime, lease_until: datetime
) -> tuple[str, list[Any]]:
    pieces, params = [], []
    for name, value in values.items():
        field_ = model._meta.get_field(name)
        column = connection.ops.quote_name(field_.column)
        if value is ClaimValue.INCREMENT:
            pieces.append(f"{column} = {column} + 1")
            continue
        if value is ClaimValue.NOW:
            value = now
        elif value is ClaimValue.LEASE_UNTIL:
            value = lease_until
        pieces.append(f"{column} = %s")
        params.append(field_.get_db_prep_save(value, connection))
    return ", ".join(pieces), params


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
    pk_field = meta.pk
    keys = [pk_field.get_db_prep_value(key, connection) for key, _, _ in group]
    assignments: list[str] = ["claimed_until = NULL"] if release else []
    params: list[Any] = []
    for name in columns:
        field_ = meta.get_field(name)
        values = [field_.get_db_prep_save(changes[name], connection) for _, _, changes in group]
        # PostgreSQL types a CASE from its branches, so NULLs and text need the column type.
        cast = f"CAST(%s AS {field_.cast_db_type(connection)})"
        slot = cast if connection.vendor == "postgresql" else "%s"
        if all(value == values[0] for value in values):
            assignments.append(f"{quote(field_.column)} = {slot}")
            params.append(values[0])
            continue
        whens = " ".join([f"WHEN %s THEN {slot}"] * len(group))
        assignments.append(f"{quote(field_.column)} = CASE {quote(pk_field.column)} {whens} END")
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
