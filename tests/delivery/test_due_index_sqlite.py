"""On SQLite too the claim is served by the due index: its state condition is written as
literals in the query, which SQLite's planner needs to match a partial index."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from dbqueue.claims import claim_statement
from delivery.scheduler.tick import DUE
from tests.conftest import sqlite_only

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


# SQLite's plan; PostgreSQL's is in test_tick_explain_pg.
@sqlite_only
@pytest.mark.django_db
def test_the_claim_searches_the_due_index():
    _, sql, params = claim_statement(DUE, now=NOW, lease=timedelta(seconds=45), limit=16)

    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        plan = [row[-1] for row in cursor.fetchall()]

    assert any(
        step.startswith("SEARCH notifications_notification USING INDEX notification_due_idx")
        for step in plan
    ), plan
