"""The slot statements on PostgreSQL read the slots of the scopes they name, through the
(scope, slot) index, however many other scopes the table holds: a tick over a wide fan-out
takes and frees slots of a hundred endpoints at a time among thousands."""

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from dbqueue.models import ConcurrencySlot
from dbqueue.slots import SlotHolder
from tests.conftest import requires_postgres
from tests.support.plans import plan_nodes

pytestmark = [requires_postgres, pytest.mark.django_db]

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
SCOPES = [f"webhook:{n:05d}" for n in range(5_000)]
CAPACITY = 4


@pytest.fixture
def wide_table() -> None:
    ConcurrencySlot.objects.bulk_create(
        ConcurrencySlot(scope=scope, slot=n) for scope in SCOPES for n in range(CAPACITY)
    )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {ConcurrencySlot._meta.db_table}")


def slot_rows_read(statement: Callable[[], Any]) -> int:
    """The rows of the slots table the one statement that `statement` runs reads (every
    scan of it, filtered out or not, times its loops), run again under EXPLAIN ANALYZE."""
    run: list[tuple[str, Any]] = []

    def keep(execute, sql, params, many, context):
        run.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(keep):
        statement()
    ((sql, params),) = run
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        (document,) = cursor.fetchone()
    plan = (json.loads(document) if isinstance(document, str) else document)[0]["Plan"]
    scans = [
        node
        for node in plan_nodes(plan)
        if node.get("Relation Name") == ConcurrencySlot._meta.db_table
        and "Scan" in node["Node Type"]
    ]
    assert scans, plan
    return sum(
        (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
        for node in scans
    )


def test_taking_slots_of_a_hundred_scopes_reads_only_theirs(wide_table):
    holder = SlotHolder(capacity=CAPACITY, lease=timedelta(seconds=45))
    holder.created |= set(SCOPES)  # their rows exist: one statement

    read = slot_rows_read(lambda: holder.take(dict.fromkeys(SCOPES[:100], 1), now=NOW))

    assert len(holder.held) == 100
    # Each scope's 4 slots, and the 100 taken once more to update them: not the table's
    # 20,000 slots.
    assert read <= 100 * CAPACITY + 100


def test_freeing_slots_of_a_hundred_scopes_reads_only_theirs(wide_table):
    holder = SlotHolder(capacity=CAPACITY, lease=timedelta(seconds=45))
    holder.created |= set(SCOPES)
    holder.take(dict.fromkeys(SCOPES[:100], 2), now=NOW)

    read = slot_rows_read(holder.release_all)

    assert not holder.held
    # Each of the 200 slots found by scope and slot, then updated by its key.
    assert read <= 2 * 100 * 2
