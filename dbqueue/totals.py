"""The workers' cumulative outcome counters (WorkerTotal), written once per tick or batch."""

import logging
from collections.abc import Mapping
from dataclasses import fields
from datetime import datetime
from typing import ClassVar

from django.db import DatabaseError, connection

from dbqueue.logfmt import logfmt_line
from dbqueue.models import WorkerTotal

logger = logging.getLogger(__name__)


class WorkerSummary:
    """Base of a worker's summary dataclass: integer counters plus `duration` (seconds).
    Subclasses name their `worker`; the same counts feed the summary line and the totals."""

    worker: ClassVar[str]
    duration: float

    def counts(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "duration"}

    def line(self) -> str:
        """`event=<worker> <counter>=… duration_s=…`, one structured line."""
        return logfmt_line(self.worker, {**self.counts(), "duration_s": self.duration})

    def add_to_totals(self, *, now: datetime) -> None:
        worker_totals_add(self.worker, self.counts(), now=now)


def worker_totals_add(worker: str, counts: Mapping[str, int], *, now: datetime) -> None:
    """Add `counts` and one run to `worker`'s totals in a single upsert. Counters are
    bookkeeping: if the database refuses, the worker's real work is already written back,
    so the failure is logged and not raised."""
    increments = sorted({"runs": 1, **{k: v for k, v in counts.items() if v}}.items())
    table = connection.ops.quote_name(WorkerTotal._meta.db_table)
    stamp = connection.ops.adapt_datetimefield_value(now)
    rows = ", ".join(["(%s, %s, %s, %s)"] * len(increments))
    # Rows in a fixed (sorted) order: two workers upserting at once lock them in the same
    # order and cannot deadlock. The syntax is the same on SQLite and PostgreSQL.
    sql = (
        f"INSERT INTO {table} (worker, name, total, updated_at) VALUES {rows} "  # noqa: S608
        "ON CONFLICT (worker, name) DO UPDATE SET "
        f"total = {table}.total + excluded.total, updated_at = excluded.updated_at"
    )
    params = [value for name, total in increments for value in (worker, name, total, stamp)]
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
