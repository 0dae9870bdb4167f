"""Jobs benchmark: how fast `consume_jobs` drains the outbox, what each job costs in SQL, and
how long a new project waits to become active.

    .venv/bin/python bench/jobs.py [--db sqlite|postgres|both] [--jobs N] [--rounds R]
        [--rate P] [--latency-seconds S] [--pg-database NAME]

For each database (a fresh SQLite file in the temp directory, or a PostgreSQL database it
creates and drops, `tw_bench_jobs` unless --pg-database says otherwise) it prints:
  1. drain rate: N jobs of a kind are inserted, then 1 or 2 `manage.py consume_jobs --once
     --limit N` processes are started at once; the rate is N over the wall time from the
     first process's start to the last one's exit (Python and Django start-up included:
     that is what a cron run costs; the time of a run on an empty queue is printed too).
     Kinds: `noop` (registered by bench/jobs_settings.py only) and the real `provision`
     job (no PROVISIONING_URL: the local writes and the invitation). Median [min-max] of
     R rounds, the four cases interleaved in each round;
  2. SQL statements and commits per job, counted in-process (CaptureQueriesContext around
     one `jobs_drain` of 500 jobs; a statement outside BEGIN..COMMIT commits on its own);
  3. create->active latency: one `consume_jobs --loop` process runs while projects are
     created through `project_create` at P per second for S seconds; each project's status
     is polled every 5 ms; p50/p95 of the time from its create's commit to seeing it active.
Prints figures and the load average; never judges them.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # Django is set up only once the bench database is chosen.
    from django.contrib.auth.models import User

    from tenancy.models import Tenant

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")
WRITES = ("INSERT", "UPDATE", "DELETE", "WITH")
COUNTED_JOBS = 500


def database_url(db: str, pg_database: str) -> str:
    if db == "postgres":
        return f"postgres://postgres@127.0.0.1:5432/{pg_database}"
    return f"sqlite:///{Path(tempfile.gettempdir()) / f'{pg_database}.sqlite3'}"


def recreate(db: str, pg_database: str, *, create: bool) -> None:
    if db == "postgres":
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {pg_database} WITH (FORCE)")
            if create:
                admin.execute(f"CREATE DATABASE {pg_database}")
        return
    path = Path(tempfile.gettempdir()) / f"{pg_database}.sqlite3"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def bench_env(url: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.jobs_settings",
        "DATABASE_URL": url,
        "SECRET_KEY": os.environ.get("SECRET_KEY", "bench-only-secret-key"),
        "PROVISIONING_URL": "",
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }


def load() -> str:
    return "load average " + ", ".join(f"{value:.2f}" for value in os.getloadavg())


def add_jobs(*, kind: str, count: int, tenant: "Tenant", user: "User") -> None:
    """`count` pending jobs of `kind`, due now; a provision job gets its own project."""
    from django.db import transaction
    from django.utils import timezone

    from jobs.models import Job
    from projects.models import Project

    now = timezone.now()
    with transaction.atomic():
        if kind == "provision":
            projects = [
                Project(id=uuid.uuid4(), tenant=tenant, name=f"p{i}", created_by=user)
                for i in range(count)
            ]
        else:
            projects = [Project(id=uuid.uuid4(), tenant=tenant, name="noop", created_by=user)]
        Project.objects.bulk_create(projects, batch_size=1000)
        Job.objects.bulk_create(
            [
                Job(
                    tenant=tenant,
                    project_id=projects[i % len(projects)].id,
                    kind=kind,
                    payload={"invite": []},
                    max_attempts=5,
                    next_attempt_at=now,
                    created_at=now,
                    updated_at=now,
                )
                for i in range(count)
            ],
            batch_size=1000,
        )


def clear() -> None:
    """Empty the queue and what the jobs made, so every run starts from the same table."""
    from django.db import connection

    with connection.cursor() as cursor:
        for table in ("notifications_notification", "jobs_job", "tenancy_operationkey"):
            cursor.execute(f"DELETE FROM {table}")  # noqa: S608
        cursor.execute("DELETE FROM projects_project")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")


def drain(env: dict[str, str], *, jobs: int, workers: int) -> float:
    """Jobs/s of `workers` consume_jobs --once processes draining `jobs` ready jobs."""
    from jobs.models import Job, JobStatus

    command = [PYTHON, "manage.py", "consume_jobs", "--once", f"--limit={jobs}"]
    command.append("--max-seconds=600")
    started = time.monotonic()
    processes = [
        subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
        for _ in range(workers)
    ]
    for process in processes:
        if process.wait() != 0:
            raise SystemExit(f"consume_jobs exited with {process.returncode}")
    elapsed = time.monotonic() - started
    left = Job.objects.exclude(status=JobStatus.COMPLETED).count()
    if left:
        raise SystemExit(f"{left} jobs were not completed")
    return jobs / elapsed


def _table_writes() -> str:
    """Updates (and how many were HOT) and the indexes every non-HOT update writes to."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'jobs_job'"
        )
        updates, hot = cursor.fetchone()
        cursor.execute("SELECT count(*) FROM pg_index WHERE indrelid = 'jobs_job'::regclass")
        (indexes,) = cursor.fetchone()
    return f"{updates} updates, {hot} HOT; {indexes} indexes"


def _idle_run(env: dict[str, str]) -> float:
    command = [PYTHON, "manage.py", "consume_jobs", "--once"]
    started = time.monotonic()
    subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.monotonic() - started


def counted(*, kind: str, tenant: "Tenant", user: "User") -> tuple[float, float]:
    """(statements, commits) per job of one in-process drain of COUNTED_JOBS jobs."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from dbqueue.clock import Clock
    from jobs.consumer import jobs_drain

    add_jobs(kind=kind, count=COUNTED_JOBS, tenant=tenant, user=user)
    autocommitted = []

    def note(execute: Callable, sql: str, params: Any, many: bool, context: dict) -> Any:
        # A write outside atomic() commits by itself; COMMITs of atomic blocks are logged.
        if not connection.in_atomic_block and sql.split()[0].upper() in WRITES:
            autocommitted.append(sql)
        return execute(sql, params, many, context)

    with CaptureQueriesContext(connection) as captured, connection.execute_wrapper(note):
        summary = jobs_drain(clock=Clock(), limit=COUNTED_JOBS, max_seconds=600)
    assert summary.completed == COUNTED_JOBS, summary.line()
    verbs = [query["sql"].split()[0].upper() for query in captured.captured_queries]
    statements = sum(verb not in TRANSACTION_CONTROL for verb in verbs)
    commits = verbs.count("COMMIT") + len(autocommitted)
    clear()
    return statements / COUNTED_JOBS, commits / COUNTED_JOBS


def latency(
    env: dict[str, str], *, tenant: "Tenant", user: "User", rate: float, seconds: float
) -> list[float]:
    """Seconds from each create's commit to its project being seen active."""
    from django.db import connection

    from projects.models import Project, ProjectStatus

    worker = subprocess.Popen(
        [PYTHON, "manage.py", "consume_jobs", "--loop", "--interval=1"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    # The worker's start-up is not the latency: wait until it has run one project.
    first = _create(tenant=tenant, user=user, name="warm-up")
    while not Project.objects.filter(pk=first, status=ProjectStatus.ACTIVE).exists():
        time.sleep(0.05)
    created: dict[uuid.UUID, float] = {}
    seen: dict[uuid.UUID, float] = {}
    lock = threading.Lock()
    done = threading.Event()

    def create() -> None:
        count = int(rate * seconds)
        began = time.monotonic()
        for i in range(count):
            time.sleep(max(0.0, began + i / rate - time.monotonic()))
            project_id = _create(tenant=tenant, user=user, name=f"l{i}")
            with lock:
                created[project_id] = time.monotonic()
        connection.close()
        done.set()

    creator = threading.Thread(target=create)
    creator.start()
    try:
        while not done.is_set() or len(seen) < len(created):
            with lock:
                waiting = [pk for pk in created if pk not in seen]
            if waiting:
                active = Project.objects.filter(pk__in=waiting, status=ProjectStatus.ACTIVE)
                stamp = time.monotonic()
                for pk in active.values_list("pk", flat=True):
                    seen[pk] = stamp
            time.sleep(0.005)
    finally:
        creator.join()
        worker.terminate()
        worker.wait(timeout=120)
    return [seen[pk] - created[pk] for pk in created]


def _create(*, tenant: "Tenant", user: "User", name: str) -> uuid.UUID:
    from django.utils import timezone

    from projects.services import project_create
    from tenancy.api.idempotency import Idempotency

    now = timezone.now()
    key = Idempotency(tenant=tenant, key=str(uuid.uuid4()), fingerprint="bench", now=now)
    answer = project_create(
        tenant=tenant,
        user=user,
        name=name,
        invite=[],
        key_row=key.key_row,
        render=lambda project: {"id": str(project.id)},
        now=now,
    )
    return uuid.UUID(json.loads(answer.body)["id"])


def run_one(args: argparse.Namespace) -> None:
    url = database_url(args.db, args.pg_database)
    recreate(args.db, args.pg_database, create=True)
    env = bench_env(url)
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    from tenancy.services import tenant_create

    call_command("migrate", verbosity=0)
    try:
        grant = tenant_create(name="bench", owner_email="owner@example.com")
        tenant, user = grant.tenant, grant.user
        print(f"\n[{args.db}] {args.jobs} jobs, {args.rounds} rounds; {load()}", flush=True)
        rates: dict[tuple[str, int], list[float]] = {}
        for _ in range(args.rounds):
            for kind in ("noop", "provision"):
                for workers in (1, 2):
                    add_jobs(kind=kind, count=args.jobs, tenant=tenant, user=user)
                    rate = drain(env, jobs=args.jobs, workers=workers)
                    rates.setdefault((kind, workers), []).append(rate)
                    clear()
        print(f"[{args.db}] 1. drain rate, jobs/s, median [min-max]; {load()}")
        idle = statistics.median(_idle_run(env) for _ in range(3))
        print(f"  (of which start-up: consume_jobs --once on an empty queue takes {idle:.2f} s)")
        for kind in ("noop", "provision"):
            one, two = rates[(kind, 1)], rates[(kind, 2)]
            print(
                f"  {kind:<9} 1 worker {_spread(one)}   2 workers {_spread(two)}   "
                f"ratio {statistics.median(two) / statistics.median(one):.2f}"
            )
        if args.db == "postgres":
            print(f"  jobs_job since the start: {_table_writes()}")
        print(f"[{args.db}] 2. SQL per job (in-process drain of {COUNTED_JOBS})")
        for kind in ("noop", "provision"):
            statements, commits = counted(kind=kind, tenant=tenant, user=user)
            print(f"  {kind:<9} {statements:.3f} statements, {commits:.3f} commits")
        waits = latency(env, tenant=tenant, user=user, rate=args.rate, seconds=args.latency_seconds)
        cuts = statistics.quantiles(waits, n=100)
        print(
            f"[{args.db}] 3. create->active, {len(waits)} projects at {args.rate:g}/s with "
            f"consume_jobs --loop: p50 {cuts[49] * 1000:.0f} ms, p95 {cuts[94] * 1000:.0f} ms, "
            f"max {max(waits) * 1000:.0f} ms; {load()}"
        )
    finally:
        from django.db import connections

        connections.close_all()
        recreate(args.db, args.pg_database, create=False)


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):>6.0f} [{min(values):.0f}-{max(values):.0f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--pg-database", default="tw_bench_jobs")
    args = parser.parse_args()
    if args.db != "both":
        run_one(args)
        return
    # Django binds one database per process: each engine runs in its own child.
    for db in ("sqlite", "postgres"):
        options = ["--jobs", args.jobs, "--rounds", args.rounds, "--rate", args.rate]
        options += ["--latency-seconds", args.latency_seconds, "--pg-database", args.pg_database]
        subprocess.run([PYTHON, __file__, "--db", db, *map(str, options)], check=True)


if __name__ == "__main__":
    main()
