"""Database helpers for bench/tick.py: a fresh bench database per engine, due rows, and
set-based filler rows (parked and future) that the due query must not pay for."""

import os
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
# BENCH_TICK_DB names another database (several people benching on one server).
PG_BENCH_DB = os.environ.get("BENCH_TICK_DB", "tw_bench_tick")
SQLITE_PATH = Path(tempfile.gettempdir()) / "tw_bench_tick.sqlite3"


def prepare_environment(db: str) -> None:
    """Point Django at a fresh bench database (call before django.setup())."""
    if db == "postgres":
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {PG_BENCH_DB} WITH (FORCE)")
            admin.execute(f"CREATE DATABASE {PG_BENCH_DB}")
        os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{PG_BENCH_DB}"
    else:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{SQLITE_PATH}{suffix}").unlink(missing_ok=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{SQLITE_PATH}"
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
    os.environ["WEBHOOK_ALLOW_PRIVATE_TARGETS"] = "true"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


def drop(db: str) -> None:
    from django.db import connection

    connection.close()
    if db == "postgres":
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {PG_BENCH_DB} WITH (FORCE)")
    else:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{SQLITE_PATH}{suffix}").unlink(missing_ok=True)


def empty_queue() -> None:
    """Remove every notification and delivery-log row, and what references them (digests):
    TRUNCATE … CASCADE on PostgreSQL, which leaves no dead rows behind."""
    from django.db import connection

    tables = ["notifications_delivery", "notifications_notification"]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"TRUNCATE {', '.join(tables)} CASCADE")
        else:
            for table in ["notifications_digest", *tables]:
                cursor.execute(f"DELETE FROM {table}")  # noqa: S608 - fixed table names


def add_due_rows(*, tenant, endpoint, count: int, due_at: datetime) -> None:
    from delivery.models import Notification

    Notification.objects.bulk_create(
        [
            Notification(
                tenant=tenant,
                channels=["webhook"],
                webhook_endpoint=endpoint,
                subject="Bench",
                body="Bench body",
                next_fire_at=due_at,
                recurrence_anchor=due_at,
            )
            for _ in range(count)
        ],
        batch_size=500,
    )


_PG_FILLER = """
INSERT INTO notifications_notification (
    id, tenant_id, channels, email_to, subject, body, rrule, timezone, next_fire_at,
    occurrence, error_count, max_attempts, state, dead_letter_reason, claim_token,
    unfinished_claims, channel_state, created_at, updated_at)
SELECT gen_random_uuid(), %(tenant)s, '["webhook"]', '[]', 'filler', '', '', 'UTC',
       CASE WHEN n %% 2 = 0 THEN NULL ELSE %(future)s + make_interval(secs => n) END,
       1, 0, 3, CASE WHEN n %% 2 = 0 THEN 'dead_lettered' ELSE 'scheduled' END,
       CASE WHEN n %% 2 = 0 THEN 'exhausted' ELSE '' END, 0, 0, '{}', %(now)s, %(now)s
FROM generate_series(1, %(count)s) AS n
"""

_SQLITE_FILLER = """
WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < %(count)s)
INSERT INTO notifications_notification (
    id, tenant_id, channels, email_to, subject, body, rrule, timezone, next_fire_at,
    occurrence, error_count, max_attempts, state, dead_letter_reason, claim_token,
    unfinished_claims, channel_state, created_at, updated_at)
SELECT lower(hex(randomblob(16))), %(tenant)s, '["webhook"]', '[]', 'filler', '', '', 'UTC',
       CASE WHEN n %% 2 = 0 THEN NULL
            ELSE strftime('%%Y-%%m-%%d %%H:%%M:%%f', %(future)s, '+' || n || ' seconds') END,
       1, 0, 3, CASE WHEN n %% 2 = 0 THEN 'dead_lettered' ELSE 'scheduled' END,
       CASE WHEN n %% 2 = 0 THEN 'exhausted' ELSE '' END, 0, 0, '{}', %(now)s, %(now)s
FROM seq
"""


def add_filler(*, tenant, count: int, now: datetime) -> None:
    """`count` rows that are not due: half parked (dead-lettered), half a day or more in the
    future; inserted with one set-based statement, then the planner statistics refreshed."""
    from django.db import connection

    future = now + timedelta(days=1)
    params = {"tenant": tenant.pk, "count": count, "now": now, "future": future}
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(_PG_FILLER, params)
            cursor.execute("ANALYZE notifications_notification")
        else:
            params["tenant"] = tenant.pk.hex
            params["now"] = now.strftime("%Y-%m-%d %H:%M:%S.%f")
            params["future"] = future.strftime("%Y-%m-%d %H:%M:%S")
            cursor.execute(_SQLITE_FILLER, params)
            cursor.execute("ANALYZE")
