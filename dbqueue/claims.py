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

What a claimer writes back afterwards is fenced on the claim token: `dbqueue.fences`.
"""

from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from django.db import connection, models

from dbqueue.ranking import (
    CAP,
    SHARE,
    ClaimSpec,
    CompiledRanking,
    compiled_ranking,
    quoted_table,
)
from dbtools.compiled import bind, raw_instances
from dbtools.fields import column_of, concrete_field

# How many ready rows a PostgreSQL claim ranks per row it takes; the rest cover rows that
# concurrent claimers hold locked, so up to OVERSAMPLE - 1 of them do not shrink a batch.
OVERSAMPLE = 4


class Claimed(list):
    """The rows a claim took (model instances, in no particular order), and `candidates`:
    how many ready rows it ranked for them (at most OVERSAMPLE times the limit), plus more
    than the limit when it ranked only the first rows of some group (ClaimSpec.groups) that
    may have more."""

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
    with _planned_for_its_values():
        rows = raw_instances(model, sql, params)
    if connection.vendor != "postgresql":
        # One writer at a time: every row the claim ranked, it took.
        return Claimed(rows, candidates=len(rows))
    # The statement returns one row with no claimed row in it when it took none.
    # The statement's candidates column, on its first row.
    candidates = rows[0].candidates if rows else 0  # type: ignore[attr-defined]
    return Claimed([row for row in rows if row.pk is not None], candidates=candidates)


@contextmanager
def _planned_for_its_values() -> Iterator[None]:
    """Run the claim unprepared: PostgreSQL plans a prepared statement once for any values
    after a few runs (a generic plan), and the claim's generic plan guessed the due rows
    wrong and took three times as long as one planned for its own time and batch."""
    raw = connection.connection
    threshold = getattr(raw, "prepare_threshold", None)
    if threshold is None:
        yield
        return
    raw.prepare_threshold = None
    try:
        yield
    finally:
        raw.prepare_threshold = threshold


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
    cap_groups = _padded(_by_cap(caps))
    capped = None if cap is None else len(cap_groups)
    compiled = compiled_ranking(spec, skipped=bool(skip), capped=capped)
    lease_until = now + lease
    assignments = _assignments(
        compiled.model,
        {"claimed_until": lease_until, "claim_token": ClaimValue.INCREMENT, **spec.on_claim},
        now=now,
        lease_until=lease_until,
    )
    values: dict[str, Any] = {"now": now, "cap": cap, "skip": list(skip)}
    for i, (most, capped_values) in enumerate(cap_groups):
        values[f"cap{i}"], values[f"cap_values{i}"] = most, capped_values
    build = _postgresql_claim if connection.vendor == "postgresql" else _sqlite_claim
    sql, params = build(compiled, assignments, values=values, limit=limit)
    return compiled.model, sql, params


def _postgresql_claim(
    compiled: CompiledRanking,
    assignments: tuple[str, list[Any]],
    *,
    values: dict[str, Any],
    limit: int,
) -> tuple[str, list[Any]]:
    table, pk = quoted_table(compiled.model)
    share = OVERSAMPLE * limit
    counted, counted_params = "count(*)", []
    prefix, prefix_params = "WITH ", []
    if compiled.candidates_sql:
        prefix = f"WITH RECURSIVE {compiled.candidates_sql}, "
        placeholders = {id(SHARE): share, id(CAP): values["cap"]}
        prefix_params = [
            placeholders.get(id(param), param)
            for param in bind(compiled.candidates_params, values, connection)
        ]
        # A group that gave all its share of rows may have more ready: the claim did not
        # see them all, so it must not report the queue drained (see Claimed.drained).
        counted = "count(*) + CASE WHEN (SELECT more FROM claim_full) THEN %s ELSE 0 END"
        counted_params = [limit + 1]
    sql = (
        f"{prefix}ranked AS ({compiled.ranked_sql}), "
        # The ranked keys are walked in the ranking's order (a materialized CTE is read
        # back in the order it was written) and each is looked up by primary key, until
        # the batch is locked. The ready predicate is wrapped in `IS TRUE` so that no
        # index can answer it: a burst inserted before the table's statistics caught up
        # otherwise had the planner scan every due row through the ready index and join
        # it to the ranking (220 ms for 5,000 due rows, then 27 ms with `= ANY`; now 1 ms).
        f"picked AS (SELECT {table}.{pk} FROM "
        f"unnest(ARRAY(SELECT {pk} FROM ranked)) WITH ORDINALITY AS claim_order(pk, n) "
        f"JOIN {table} ON {table}.{pk} = claim_order.pk WHERE ({compiled.where_sql}) IS TRUE "
        f"ORDER BY claim_order.n "
        f"LIMIT %s FOR UPDATE OF {table} SKIP LOCKED), "
        f"claimed AS (UPDATE {table} AS claimed SET {assignments[0]} FROM picked "
        f"WHERE claimed.{pk} = picked.{pk} RETURNING claimed.*) "
        # The count comes back even when no row was claimed (one row of NULLs then).
        "SELECT claimed.*, counted.candidates FROM "
        f"(SELECT {counted} AS candidates FROM ranked) AS counted "
        "LEFT JOIN claimed ON TRUE"
    )
    params = [
        *prefix_params,
        *bind(compiled.ranked_params, values, connection),
        share,
        *bind(compiled.where_params, values, connection),
        limit,
        *assignments[1],
        *counted_params,
    ]
    return sql, params


def _sqlite_claim(
    compiled: CompiledRanking,
    assignments: tuple[str, list[Any]],
    *,
    values: dict[str, Any],
    limit: int,
) -> tuple[str, list[Any]]:
    # The single writer lock serialises claimers, so the ranking itself is the pick.
    table, pk = quoted_table(compiled.model)
    sql = (
        f"UPDATE {table} SET {assignments[0]} WHERE {pk} IN "
        f"(SELECT {pk} FROM ({compiled.ranked_sql}) AS ranked) RETURNING *"
    )
    return sql, [*assignments[1], *bind(compiled.ranked_params, values, connection), limit]


def _by_cap(caps: Mapping[Any, int]) -> list[tuple[int, list[Any]]]:
    """The capped values grouped by their cap, smallest cap first: a statement tests one
    list per distinct cap, not one value after another."""
    groups: dict[int, list[Any]] = {}
    for value, most in caps.items():
        groups.setdefault(most, []).append(value)
    return sorted(groups.items(), key=lambda group: group[0])


def _padded(items: list) -> list:
    """`items`, its first repeated up to the next power of two: a claim with 5 distinct
    caps runs the statement compiled for 8, so a tick whose endpoints' room comes and goes
    compiles a handful of shapes, not one per count (a group tested twice changes
    nothing)."""
    if not items:
        return items
    size = 1 << (len(items) - 1).bit_length()
    return items + [items[0]] * (size - len(items))


def _assignments(
    model: type[models.Model], values: Mapping[str, Any], *, now: datetime, lease_until: datetime
) -> tuple[str, list[Any]]:
    pieces, params = [], []
    for name, value in values.items():
        field_ = concrete_field(model, name)
        column = connection.ops.quote_name(column_of(field_))
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
