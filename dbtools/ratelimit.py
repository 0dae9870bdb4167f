"""Rate-limit counters every process sees: one `RateWindow` row per key in the database.

Counting a request is one statement: an INSERT … ON CONFLICT DO UPDATE … RETURNING that
starts the key's window at its first request (or at the first request after the window
ended) and otherwise adds one, and answers the new count with the time left in the window.
The row lock of the upsert makes concurrent requests on any number of machines count
exactly; the clock is the database's, so machines with skewed clocks agree on the window.

A window anchored at the key's first request, rather than at a multiple of the period,
also means a window never ends part-way through a burst that fits in one period.

Rows whose window has ended are deleted when a key starts a new window, so the table holds
about one row per key active within the longest period.

On PostgreSQL the table is UNLOGGED (migration 0005): a count is not worth a wait for the
write-ahead log on every request. A crash empties it (every window starts again) and
replicas hold none of it, so counters are counted and read on the primary only.
"""

from dataclasses import dataclass
from typing import Any

from django.db import connections, models, router
from django.db.backends.base.base import BaseDatabaseWrapper

from dbtools.models import RateWindow
from dbtools.rates import Rate

_MICROS = 1_000_000

_NOW_US = {
    "postgresql": "(EXTRACT(EPOCH FROM STATEMENT_TIMESTAMP()) * 1000000)::bigint",
    # julianday('now') is fixed for the whole statement; the Unix epoch is Julian day 2440587.5.
    "sqlite": "CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)",
}


@dataclass(frozen=True)
class Hit:
    """The outcome of counting one request against a rate."""

    count: int
    limit: int
    seconds_left: float

    @property
    def allowed(self) -> bool:
        return self.count <= self.limit


class DatabaseNowMicros(models.Expression):
    """The database's clock in microseconds since the Unix epoch (the statement's time)."""

    output_field = models.BigIntegerField()

    def as_sql(  # type: ignore[override]  # the stubs want a tuple; the compiler takes a list
        self, compiler: Any, connection: BaseDatabaseWrapper
    ) -> tuple[str, list]:
        return _NOW_US[connection.vendor], []


def count_request(key: str, rate: Rate) -> Hit:
    """Count one request of `key` against `rate` in the database every worker shares."""
    using = router.db_for_write(RateWindow)
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(_upsert_sql(connection), [key, rate.period_seconds * _MICROS])
        count, left_us = cursor.fetchone()
    if count == 1:
        _prune(using)
    return Hit(count=count, limit=rate.limit, seconds_left=left_us / _MICROS)


def uncount_request(key: str) -> None:
    """Take back one request counted in `key`'s current window: a request its limit should
    not have counted after all. A window that has ended is left alone (it counts nothing)."""
    using = router.db_for_write(RateWindow)
    RateWindow.objects.using(using).filter(
        key=key, count__gt=0, expires_us__gt=DatabaseNowMicros()
    ).update(count=models.F("count") - 1)


def blocked_for_us(key: models.Expression, limit: models.Expression) -> models.Subquery:
    """An expression for other queries, run on the primary: the microseconds left in `key`'s
    current window when it has counted at least `limit` requests, else NULL (one index
    lookup)."""
    left_us = _left_us_when_over(key, limit)[:1]
    return models.Subquery(left_us, output_field=models.BigIntegerField())


def blocked_seconds(key: str, limit: int) -> float | None:
    """What `blocked_for_us` tells, as a statement of its own: the seconds left in `key`'s
    window when it has counted at least `limit` requests, else None."""
    left_us = _left_us_when_over(key, limit).using(router.db_for_write(RateWindow)).first()
    return None if left_us is None else left_us / _MICROS


def _left_us_when_over(key: Any, limit: Any) -> models.QuerySet:
    now = DatabaseNowMicros()
    over = RateWindow.objects.filter(key=key, count__gte=limit, expires_us__gt=now)
    return over.annotate(left_us=models.F("expires_us") - now).values_list("left_us", flat=True)


def _upsert_sql(connection: BaseDatabaseWrapper) -> str:
    quote = connection.ops.quote_name
    table, key, count, expires = (
        quote(name) for name in (RateWindow._meta.db_table, "key", "count", "expires_us")
    )
    now = _NOW_US[connection.vendor]
    ended = f"{table}.{expires} <= {now}"
    # Only quoted names and the vendor's clock expression are formatted in; values bind.
    return (
        f"INSERT INTO {table} ({key}, {count}, {expires}) VALUES (%s, 1, {now} + %s) "  # noqa: S608
        f"ON CONFLICT ({key}) DO UPDATE SET "
        f"{count} = CASE WHEN {ended} THEN 1 ELSE {table}.{count} + 1 END, "
        f"{expires} = CASE WHEN {ended} THEN excluded.{expires} ELSE {table}.{expires} END "
        f"RETURNING {count}, {expires} - {now}"
    )


def _prune(using: str) -> None:
    RateWindow.objects.using(using).filter(expires_us__lte=DatabaseNowMicros()).delete()
