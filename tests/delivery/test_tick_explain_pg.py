"""The claim is served by the partial index notification_tenant_due_idx, which follows the
stored state, so its cost does not grow with parked, completed or future rows."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from dbqueue.claims import claim_statement
from delivery.scheduler.tick import DUE
from tests.conftest import requires_postgres
from tests.delivery.factories import make_notifications, make_tenant

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)

pytestmark = [requires_postgres]


def fill(tenant_id) -> None:
    """20,000 rows that are not due: a quarter completed, a quarter parked at their attempt
    limit yet with a next_fire_at in the due range (what a lowered MAX_ATTEMPTS used to
    leave), half in the future; then fresh statistics."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO notifications_notification (
                id, tenant_id, channels, email_to, subject, body, rrule, timezone,
                next_fire_at, occurrence, error_count, max_attempts, state,
                dead_letter_reason, claim_token, unfinished_claims, channel_state,
                created_at, updated_at)
            SELECT gen_random_uuid(), %(tenant)s, '["webhook"]', '[]', '', '', '', 'UTC',
                   CASE WHEN n %% 4 = 0 THEN NULL
                        WHEN n %% 4 = 2 THEN %(now)s - make_interval(mins => n)
                        ELSE %(now)s + make_interval(mins => n) END,
                   1, CASE WHEN n %% 4 = 2 THEN 3 ELSE 0 END, 3,
                   CASE WHEN n %% 4 = 0 THEN 'completed'
                        WHEN n %% 4 = 2 THEN 'parked'
                        ELSE 'scheduled' END,
                   '', 0, 0, '{}', %(now)s, %(now)s
            FROM generate_series(1, 20000) AS n
            """,
            {"tenant": tenant_id, "now": NOW},
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

    assert "notification_tenant_due_idx" in plan
    assert "Seq Scan" not in plan
