"""The ready rows a claim picks from, in fair order, compiled once per shape of claim.

A claim ranks the ready rows within their `fair_by` group (the tenant) by the claim order,
and takes every group's first row before any group's second; with a cap, at most that many
rows of one `capped_by` value (a webhook endpoint) are ranked at all. Compiling a queryset
costs milliseconds of Python, so the compiled parts are kept per shape of claim (queue,
vendor, ready predicate, whether values are skipped, how many distinct caps) and only their
parameters are bound per call (`dbqueue.claims.claim_statement`). Skipped and capped values
are list parameters (`dbtools.compiled.AmongParams`): a tick that knows 2,000 endpoints
claims with a statement as small as one that knows 2.
"""

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from django.db import connection, models
from django.db.models.expressions import RawSQL
from django.db.models.functions import RowNumber

from dbtools.compiled import AmongParams, Param
from dbtools.fields import column_of

# Compiled claim statements kept per process (one per queue and shape of claim).
COMPILED_MAX = 64


@dataclass(frozen=True)
class ClaimSpec:
    """How a queue claims: `ready(now)` is the queryset of claimable rows (one table, no
    joins; `now` is an expression standing for the claim time, so use it only inside the
    query), `order_by` the claim order within a group, `fair_by` the field whose groups
    take turns (round-robin), and `on_claim` further columns the claim sets (a value, or a
    ClaimValue). `capped_by` names the field whose values a claim may skip or cap (see
    `claim`); rows where it is NULL are neither.

    `groups()`, when given, is the rows a ready row is always among (no `now` in it), kept
    in a partial index on (`fair_by`, *`order_by`, pk) with the same condition. A claim on
    PostgreSQL then walks that index: it skips from one group to the next and takes each
    group's first ready rows from it, so it ranks a few rows per group instead of sorting
    every ready row, and costs the same 5,000 or 100,000 rows deep. Rows whose `fair_by` is
    NULL are one group of their own (a Django task's job, which has no tenant); a spec with
    both a nullable `fair_by` and `capped_by` cannot have groups."""

    ready: Callable[[Any], models.QuerySet]
    order_by: tuple[str, ...]
    fair_by: str
    on_claim: Mapping[str, Any] = field(default_factory=dict)
    capped_by: str | None = None
    groups: Callable[[], models.QuerySet] | None = None

    @property
    def capped_name(self) -> str:
        """`capped_by`, for a claim that skips or caps (only a spec naming it may)."""
        if self.capped_by is None:
            raise ValueError("this claim names no field to skip or cap")
        return self.capped_by


@dataclass(frozen=True)
class CompiledRanking:
    """The parts of a claim statement that Django compiles, with Param placeholders:
    the fair ranking (ending in `LIMIT %s`, bound to the rows it ranks) and, for
    PostgreSQL, the ready predicate and the claim order on the locked table; with groups,
    the `claim_candidates` the ranking ranks (CTEs to put before it, their one `%s` the
    rows the ranking ranks)."""

    model: type[models.Model]
    ranked_sql: str
    ranked_params: tuple[Any, ...]
    where_sql: str = ""
    where_params: tuple[Any, ...] = ()
    order_sql: str = ""
    candidates_sql: str = ""
    candidates_params: tuple[Any, ...] = ()


_COMPILED: "OrderedDict[tuple, CompiledRanking]" = OrderedDict()


def compiled_ranking(spec: ClaimSpec, *, skipped: bool, capped: int | None) -> CompiledRanking:
    """The compiled parts for this shape of claim, compiled on first use. `skipped`: whether
    the list parameter `skip` names values to leave alone; `capped` is None without a cap,
    else how many distinct own caps there are (`cap_values{i}` are the values capped at
    `cap{i}`). The key holds the ready predicate itself (its constants, e.g. a setting,
    included), so a different predicate is never served another's statement."""
    ready = spec.ready(Param("now", models.DateTimeField()))
    model = ready.model
    if skipped:
        target = _field(model, spec.capped_name)
        ready = ready.exclude(AmongParams(spec.capped_name, "skip", target))
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
    return cast(models.Field, getattr(field_, "target_field", field_))


def _compile(spec: ClaimSpec, ready: models.QuerySet, capped: int | None) -> CompiledRanking:
    model = ready.model
    if connection.vendor != "postgresql":
        ranked_sql, ranked_params = _ranked(spec, ready, capped).query.sql_with_params()
        # The ranking's row count is a parameter, so one statement serves every batch size.
        return CompiledRanking(model, ranked_sql + " LIMIT %s", tuple(ranked_params))
    # Django keeps (unreferenced) aliases for joins it trimmed, e.g. for a negated lookup
    # on a nullable foreign key: only joins still in use count.
    joined = {alias for alias, uses in ready.query.alias_refcount.items() if uses}
    if joined - {model._meta.db_table}:
        raise ValueError("a claim's ready queryset must not join other tables")
    # The ready predicate again, on the locked table itself: a row another claimer committed
    # after our snapshot is re-checked in its new version (EvalPlanQual) and refused, where a
    # check on the ranked copy would let it be claimed twice.
    where_sql, where_params = _where(ready)
    table, pk = quoted_table(model)
    order = _order_sql(model, spec.order_by)
    candidates_sql, candidates_params = "", ()
    if spec.groups is not None:
        candidates_sql, candidates_params = _candidates(spec, model, where_sql, where_params)
        among = RawSQL(  # noqa: S611 - the model's own names only
            f"{table}.{pk} = ANY(ARRAY(SELECT {pk} FROM claim_candidates))",
            [],
            output_field=models.BooleanField(),
        )
        # The candidates are ready rows already: testing the predicate again let a planner
        # with stale statistics intersect the candidates with every due row of the ready
        # index. The lock still tests it (`where_sql`).
        ready = model._base_manager.filter(among)
    ranked_sql, ranked_params = _ranked(spec, ready, capped).query.sql_with_params()
    return CompiledRanking(
        model,
        ranked_sql + " LIMIT %s",
        tuple(ranked_params),
        where_sql,
        tuple(where_params),
        order,
        candidates_sql,
        candidates_params,
    )


def _candidates(
    spec: ClaimSpec, model: type[models.Model], where_sql: str, where_params: list[Any]
) -> tuple[str, tuple[Any, ...]]:
    """The CTEs that pick the rows a claim ranks (`claim_candidates`):
    - the groups with rows in `groups()`, one index probe each (a skip scan), and those of
      them with a ready row;
    - of each of these, its first ready rows in claim order, as many as an even share of
      the rows the ranking ranks (SHARE) asks;
    - and where one capped value took CAP or more of a group's share (an endpoint's
      backlog), the group's first rows of its other values, so the backlog holds them back
      no more than a ranking of every ready row would.
    `claim_full` says whether some group may have had more ready rows than it gave."""
    assert spec.groups is not None
    groups_sql, groups_params = _where(spec.groups())
    table, pk = quoted_table(model)
    group = f"{table}.{_column(model, spec.fair_by)}"
    capped = f"{table}.{_column(model, spec.capped_by)}" if spec.capped_by else "NULL"
    order = _order_sql(model, (*spec.order_by, model._meta.pk.name))
    share = "(SELECT rows FROM claim_share)"
    nullable = model._meta.get_field(spec.fair_by).null
    if nullable and spec.capped_by:
        raise ValueError("a claim with groups cannot cap while its fair_by may be NULL")

    def first_rows(of: str, where: str = "") -> str:
        return (
            f"CROSS JOIN LATERAL (SELECT {table}.{pk}, {group} AS g, {capped} AS c "
            f"FROM {table} WHERE {where_sql} AND {group} = {of}{where} "
            f"ORDER BY {order} LIMIT {share})"
        )

    # The NULL group is looked up on its own: `=` never matches NULL, and an index answers
    # `IS NULL` where it cannot answer `IS NOT DISTINCT FROM`. Its order names the group
    # too, so that the planner reads it in index order (IS NULL, unlike `=`, does not tell
    # it the column is constant) instead of sorting every ready row of the group.
    null_ready, null_first, null_params = "", "", ()
    if nullable:
        # In index order too (a scalar subquery: EXISTS drops the order): as an EXISTS the
        # planner scanned the table from its start, through every job a drain had finished.
        null_ready = (
            f" UNION ALL SELECT NULL WHERE (SELECT true FROM {table} "
            f"WHERE {where_sql} AND {group} IS NULL ORDER BY {group}, {order} LIMIT 1)"
        )
        null_first = (
            f" UNION ALL (SELECT {table}.{pk}, NULL, NULL FROM {table} "
            f"WHERE {where_sql} AND {group} IS NULL ORDER BY {group}, {order} LIMIT {share})"
        )
        null_params = tuple(where_params)
    sql = (
        "claim_groups AS ("
        f"(SELECT {group} AS g FROM {table} WHERE {groups_sql} AND {group} IS NOT NULL "
        f"ORDER BY {group} LIMIT 1) "
        f"UNION ALL SELECT (SELECT {group} FROM {table} WHERE {groups_sql} "
        f"AND {group} > claim_groups.g ORDER BY {group} LIMIT 1) "
        "FROM claim_groups WHERE claim_groups.g IS NOT NULL), "
        # A scalar subquery, not EXISTS, for the same reason as the NULL group's: with
        # statistics that had not caught up with a burst, the planner turned EXISTS into
        # a join with every ready row (53 ms, 100,000 rows deep) instead of a probe a group.
        "claim_ready_groups AS (SELECT claim_groups.g FROM claim_groups "
        f"WHERE (SELECT true FROM {table} WHERE {where_sql} AND {group} = claim_groups.g "
        f"ORDER BY {order} LIMIT 1){null_ready}), "
        "claim_share AS (SELECT ceil(%s::numeric / greatest(count(*), 1))::integer AS rows "
        "FROM claim_ready_groups), "
        f"claim_first AS (SELECT first.* FROM claim_ready_groups "
        f"{first_rows('claim_ready_groups.g')} AS first{null_first}), "
        "claim_saturated AS (SELECT g, c FROM claim_first WHERE c IS NOT NULL "
        "GROUP BY g, c HAVING count(*) >= %s), "
        "claim_rest AS (SELECT rest.* FROM (SELECT DISTINCT g FROM claim_saturated) AS full_groups "
        + first_rows(
            "full_groups.g",
            f" AND ({capped} IS NULL OR NOT ({capped} = ANY(ARRAY("
            "SELECT c FROM claim_saturated WHERE claim_saturated.g = full_groups.g))))",
        )
        + " AS rest), "
        f"claim_candidates AS (SELECT {pk}, g FROM claim_first "
        f"UNION SELECT {pk}, g FROM claim_rest), "
        "claim_full AS (SELECT EXISTS (SELECT 1 FROM claim_first "
        "WHERE g NOT IN (SELECT g FROM claim_saturated) "
        f"GROUP BY g HAVING count(*) >= {share}) "
        f"OR EXISTS (SELECT 1 FROM claim_rest GROUP BY g HAVING count(*) >= {share}) AS more)"
    )
    params = (
        *groups_params,
        *groups_params,
        *where_params,
        *null_params,
        SHARE,
        *where_params,
        *null_params,
        CAP,
        *where_params,
    )
    return sql, params


class _Placeholder:
    """A value of the candidates' parameters that the claim puts in at each run."""


# The rows the ranking ranks, and the cap of one capped value.
SHARE, CAP = _Placeholder(), _Placeholder()


def _where(queryset: models.QuerySet) -> tuple[str, list[Any]]:
    compiler = queryset.query.get_compiler(connection=connection)
    sql, params = compiler.compile(queryset.query.where)
    return sql, list(params)


def quoted_table(model: type[models.Model]) -> tuple[str, str]:
    """The model's table and primary key column, quoted."""
    quote = connection.ops.quote_name
    return quote(model._meta.db_table), quote(column_of(cast(models.Field, model._meta.pk)))


def _order_sql(model: type[models.Model], names: tuple[str, ...]) -> str:
    """An ORDER BY list of the model's fields, on its table (`-name`: descending)."""
    table, _ = quoted_table(model)
    return ", ".join(
        f"{table}.{_column(model, name.lstrip('-'))}" + (" DESC" if name.startswith("-") else "")
        for name in names
    )


def _column(model: type[models.Model], name: str) -> str:
    return connection.ops.quote_name(column_of(cast(models.Field, model._meta.get_field(name))))


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
        name = spec.capped_name
        integer, target = models.IntegerField(), _field(ready.model, name)
        most: Any = Param("cap", integer)
        if capped:
            whens = [
                models.When(
                    AmongParams(name, f"cap_values{i}", target), then=Param(f"cap{i}", integer)
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
