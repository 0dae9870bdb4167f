"""Recovery benchmark: one endpoint's recovery task over N failed deliveries.

    /work/venv/bin/python bench/recover.py [--db sqlite|postgres|both] [--rows N]

For each database (a fresh SQLite file, or a PostgreSQL database tw_bench_recover, or the
one BENCH_RECOVER_DB names, that it creates and drops) it writes N dead-lettered one-shot
webhook rows for one endpoint (and as many for another endpoint, which the task must not
touch), starts the recovery over the last day and runs the jobs consumer once. It prints the
task's run time (one `jobs_drain` pass, claim to completion), rows re-queued per second and
the SQL statements it took (in-process, CaptureQueriesContext), with and without
transaction control (with BENCH_RECOVER_SLOWEST=1, also the time spent in each kind of
statement). Prints; never judges.
"""

import argparse
import os
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
PG_BENCH_DB = os.environ.get("BENCH_RECOVER_DB", "tw_bench_recover")
SQLITE_PATH = Path(tempfile.gettempdir()) / "tw_bench_recover.sqlite3"
TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


def prepare_environment(db: str) -> None:
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


def dead_rows(*, tenant, endpoint, count: int, since) -> None:
    from delivery.models import Notification, NotificationState

    Notification.objects.bulk_create(
        [
            Notification(
                tenant=tenant,
                channels=["webhook"],
                webhook_endpoint=endpoint,
                subject="Bench",
                state=NotificationState.DEAD_LETTERED,
                dead_letter_reason="exhausted",
                error_count=3,
                created_at=since + timedelta(milliseconds=i),
            )
            for i in range(count)
        ],
        batch_size=1000,
    )


def run_one(db: str, rows: int) -> None:
    prepare_environment(db)
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from dbqueue.clock import Clock
    from delivery.models import Notification, WebhookEndpoint
    from jobs.consumer import jobs_drain
    from jobs.models import Job
    from tenancy.models import Tenant
    from webhooks.recovery import endpoint_recover

    call_command("migrate", verbosity=0)
    try:
        tenant = Tenant.objects.create(name="bench")
        endpoint, other = (
            WebhookEndpoint.objects.create(tenant=tenant, url="https://hooks.example.com/in")
            for _ in range(2)
        )
        since = timezone.now() - timedelta(hours=20)
        dead_rows(tenant=tenant, endpoint=endpoint, count=rows, since=since)
        dead_rows(tenant=tenant, endpoint=other, count=rows, since=since)

        started = time.monotonic()
        task = endpoint_recover(
            tenant=tenant, endpoint_id=endpoint.id, since=timezone.now() - timedelta(days=1)
        )
        accepted = time.monotonic() - started
        with CaptureQueriesContext(connection) as captured:
            started = time.monotonic()
            summary = jobs_drain(clock=Clock(), limit=10, max_seconds=3600)
            seconds = time.monotonic() - started
        task = Job.objects.get(pk=task.pk)
        queued = Notification.objects.filter(webhook_endpoint=endpoint, state="scheduled").count()
        untouched = Notification.objects.filter(webhook_endpoint=other, state="scheduled").count()
        assert summary.completed == 1, summary
        assert task.payload["done"] == task.payload["total"] == queued == rows, task.payload
        assert untouched == 0
        queries = captured.captured_queries
        work = [q for q in queries if not q["sql"].upper().startswith(TRANSACTION_CONTROL)]
        print(
            f"[{db}] recover: {rows} rows re-queued in {seconds:.2f} s "
            f"({rows / seconds:.0f} rows/s; the API's create took {accepted * 1000:.0f} ms)"
        )
        if os.environ.get("BENCH_RECOVER_SLOWEST"):
            by_kind: dict[str, float] = {}
            for q in work:
                kind = q["sql"][:40]
                by_kind[kind] = by_kind.get(kind, 0.0) + float(q["time"])
            for kind, total in sorted(by_kind.items(), key=lambda item: -item[1])[:5]:
                print(f"  {total:.2f} s  {kind}")
        print(
            f"[{db}] statements: {len(work)} ({len(queries)} with transaction control), "
            f"{len(work) / rows:.4f} per row"
        )
    finally:
        drop(db)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--rows", type=int, default=10_000)
    args = parser.parse_args()
    if args.db != "both":
        run_one(args.db, args.rows)
        return
    import subprocess

    # Django is set up once per process: one child per database.
    for db in ("sqlite", "postgres"):
        subprocess.run([sys.executable, __file__, "--db", db, "--rows", str(args.rows)], check=True)


if __name__ == "__main__":
    main()
