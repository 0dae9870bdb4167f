"""The due query is served by the partial index notification_due_idx, so its cost does not
grow with parked or future rows."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from dbqueue.claims import claim_statement
from notifications.scheduler.tick import DUE
from tests.conftest import requires_postgres
from tests.notifications.factories import make_notifications, make_tenant

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)

pytestmark = [requires_postgres]


def fill(tenant_id) -> None:
    """20,000 parked or future rows and a few due ones, then fresh statistics."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO notifications_notification (
                id, tenant_id, channels, email_to, subject, body, rrule, timezone,
                next_fire_at, occurrence, error_count, dead_letter_reason, claim_token,
                unfinished_claims, channel_state, created_at, updated_at)
            SELECT gen_random_uuid(), %s, '["webhook"]', '[]', '', '', '', 'UTC',
                   CASE WHEN n %% 2 = 0 THEN NULL
                        ELSE %s + make_interval(mins => n) END,
                   1, 0, '', 0, 0, '{}', %s, %s
            FROM generate_series(1, 20000) AS n
            """,
            [tenant_id, NOW, NOW, NOW],
        )
        cursor.execute("ANALYZE notifications_notification")


@pytest.mark.django_db
def test_due_query_uses_the_partial_index():
    tenant = make_tenant()
    make_notifications(5, tenant=tenant, next_fire_at=NOW)
    fill(tenant.id)
    # The claim statement itself, as run_tick sends it.
    _, sql, params = claim_statement(DUE, now=NOW, lease=timedelta(seconds=45), limit=16)

    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())

    assert "notification_due_idx" in plan
    assert "Seq Scan" not in plan
