"""The workers' cumulative outcome counters (WorkerTotal), written once per tick or batch."""

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import ClassVar

from django.db import DatabaseError, connection

from dbqueue.models import WorkerTotal
from dbtools.logfmt import logfmt_line

logger = logging.getLogger(__name__)


@dataclass
class Histogram:
    """Durations (observed in milliseconds) counted into buckets with upper `bounds` in
    seconds, kept as the totals keep them: one counter per bucket, `<name>_le_<bound>` and
    `<name>_le_inf`, each counting only its own bucket (/metrics makes them cumulative),
    and `<name>_sum_ms`."""

    name: str
    bounds: tuple[float, ...]
    buckets: dict[str, int] = field(default_factory=dict)
    sum_ms: int = 0

    def observe(self, milliseconds: int) -> None:
        label = next((f"{b:g}" for b in self.bounds if milliseconds <= b * 1000), "inf")
        key = f"{self.name}_le_{label}"
        self.buckets[key] = self.buckets.get(key, 0) + 1
        self.sum_ms += milliseconds

    def totals(self) -> dict[str, int]:
        return {**self.buckets, f"{self.name}_sum_ms": self.sum_ms}

    def cumulative(self, totals: Mapping[str, int]) -> Iterator[tuple[str, int]]:
        """(le, observations at or below it) per bound, then ("+Inf", all), from `totals`
        as stored: the `_bucket` samples of a Prometheus histogram."""
        running = 0
        for label in [f"{b:g}" for b in self.bounds] + ["inf"]:
            running += totals.get(f"{self.name}_le_{label}", 0)
            yield ("+Inf" if label == "inf" else label), running


class WorkerSummary:
    """Base of a worker's summary dataclass. Integer fields are counters, added to the
    totals, except those named in `gauges`, which the totals set (a level, not an event
    count). Float fields (`duration`, maxima) are printed on the line and never summed.
    Other fields (a Histogram) feed the totals through `histogram_totals` only."""

    worker: ClassVar[str]
    gauges: ClassVar[frozenset[str]] = frozenset()
    duration: float

    def _figures(self) -> dict[str, int | float]:
        # Every summary is a dataclass; this base is not one.
        values = {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]
        return {k: v for k, v in values.items() if type(v) in (int, float)}

    def counts(self) -> dict[str, int]:
        return {k: v for k, v in self._figures().items() if type(v) is int and k not in self.gauges}

    def line(self) -> str:
        """`event=<worker> <figure>=… duration_s=…`, one structured line."""
        figures = {k: v for k, v in self._figures().items() if k != "duration"}
        return logfmt_line(self.worker, {**figures, "duration_s": self.duration})

    def histogram_totals(self) -> dict[str, int]:
        return {}

    def add_to_totals(self, *, now: datetime) -> None:
        worker_totals_add(
            self.worker,
            {**self.counts(), **self.histogram_totals()},
            gauges={name: getattr(self, name) for name in self.gauges},
            now=now,
        )


def worker_totals_add(
    worker: str,
    counts: Mapping[str, int],
    *,
    now: datetime,
    gauges: Mapping[str, int] | None = None,
) -> None:
    """Add `counts` and one run to `worker`'s totals, and set its `gauges`, in a single
    upsert. Counters are bookkeeping: if the database refuses, the worker's real work is
    already written back, so the failure is logged and not raised."""
    gauges = gauges or {}
    increments = {"runs": 1, **{k: v for k, v in counts.items() if v}}
    # A gauge is written even at 0: it says how things stood when the worker last ran.
    rows_values = sorted({**increments, **gauges}.items())
    table = connection.ops.quote_name(WorkerTotal._meta.db_table)
    stamp = connection.ops.adapt_datetimefield_value(now)
    rows = ", ".join(["(%s, %s, %s, %s)"] * len(rows_values))
    added = f"{table}.total + excluded.total"
    if gauges:
        # Gauges live in the same table and the same statement as the counters, so a tick
        # still costs one statement for its totals; only the conflict rule tells them apart.
        names = ", ".join(["%s"] * len(gauges))
        added = f"CASE WHEN excluded.name IN ({names}) THEN excluded.total ELSE {added} END"
    # Rows in a fixed (sorted) order: two workers upserting at once lock them in the same
    # order and cannot deadlock. The syntax is the same on SQLite and PostgreSQL.
    sql = (
        f"INSERT INTO {table} (worker, name, total, updated_at) VALUES {rows} "  # noqa: S608
        f"ON CONFLICT (worker, name) DO UPDATE SET "
        f"total = {added}, updated_at = excluded.updated_at"
    )
    params = [value for name, total in rows_values for value in (worker, name, total, stamp)]
    params += sorted(gauges)
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
    except DatabaseError:
        logger.warning("could not add to the %s totals", worker, exc_info=True)


def worker_totals() -> dict[str, dict[str, tuple[int, datetime]]]:
    """{worker: {name: (total, updated_at)}} for every counter written so far."""
    totals: dict[str, dict[str, tuple[int, datetime]]] = {}
    for row in WorkerTotal.objects.all():
        totals.setdefault(row.worker, {})[row.name] = (row.total, row.updated_at)
    return totals
