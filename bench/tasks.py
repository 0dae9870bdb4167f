"""Django tasks benchmark: Tickwork's OutboxBackend (`consume_jobs`) against django-tasks-db
(`db_worker`) on the same PostgreSQL database, one worker each, alternated.

    .venv/bin/pip install django-tasks-db   # the peer; not a dependency of the product
    .venv/bin/python bench/tasks.py [--tasks N] [--rounds R] [--bulk M] [--pg-database NAME]

It creates (and drops at the end) the PostgreSQL database `tw_bench_tasks`, migrates it with
bench/tasks_settings.py (both backends' tables), and in each of R rounds, for each backend in
turn (the order alternates between rounds):
  1. drain: N no-op `@task`s are enqueued, both tables are vacuumed and analyzed, then one
     worker drains them and exits
     (`manage.py consume_jobs --once --limit N`, `manage.py db_worker --batch --backend db`);
     tasks/s is N over the worker's wall time, Python and Django start-up included, and
     again over that time less the same worker's run on an empty queue (its start-up);
  2. bulk enqueue: M enqueues of the no-op task in one transaction, tasks/s.
Prints median [min-max] of the rounds, the SQL statements of one enqueue, and the load
average; never judges them.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
WORKERS = {
    "outbox": ["consume_jobs", "--once", "--max-seconds", "3600", "--limit"],
    # --verbosity 0: no log line per task (consume_jobs logs none either at LOG_LEVEL=WARNING).
    "django-tasks-db": [
        "db_worker",
        "--batch",
        "--no-startup-delay",
        "--backend",
        "db",
        "--verbosity",
        "0",
    ],
}


def recreate(name: str, *, create: bool) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        if create:
            admin.execute(f"CREATE DATABASE {name}")


def bench_env(url: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.tasks_settings",
        "DATABASE_URL": url,
        "SECRET_KEY": os.environ.get("SECRET_KEY", "bench-only-secret-key"),
        "PROVISIONING_URL": "",
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }


def manage(env: dict[str, str], *args: str) -> float:
    """Run `manage.py args` to its end; its wall time in seconds."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return time.perf_counter() - started


def worker_args(backend: str, tasks: int) -> list[str]:
    return [*WORKERS[backend], str(tasks)] if backend == "outbox" else WORKERS[backend]


def enqueue(backend: str, count: int) -> float:
    """Enqueue `count` no-op tasks in one transaction; tasks per second."""
    from django.db import transaction

    from bench.tasks_noop import noop, noop_db

    task = noop if backend == "outbox" else noop_db
    started = time.perf_counter()
    with transaction.atomic():
        for _ in range(count):
            task.enqueue()
    return count / (time.perf_counter() - started)


def clear() -> None:
    from django_tasks_db.models import DBTaskResult

    from jobs.models import TASK_KIND, Job

    Job.objects.filter(kind=TASK_KIND).delete()
    DBTaskResult.objects.all().delete()


def vacuum() -> None:
    """VACUUM ANALYZE both backends' tables: each drain starts on fresh statistics and no
    dead rows left by the rounds before, whichever backend ran last."""
    from django.db import connection
    from django_tasks_db.models import DBTaskResult

    from jobs.models import Job

    with connection.cursor() as cursor:
        for model in (Job, DBTaskResult):
            cursor.execute(f"VACUUM ANALYZE {connection.ops.quote_name(model._meta.db_table)}")


def finished(backend: str) -> int:
    from django_tasks_db.models import DBTaskResult

    from jobs.models import TASK_KIND, Job, JobStatus

    if backend == "outbox":
        return Job.objects.filter(kind=TASK_KIND, status=JobStatus.COMPLETED).count()
    return DBTaskResult.objects.filter(status="SUCCESSFUL").count()


def statements_of_one_enqueue(backend: str) -> list[str]:
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from bench.tasks_noop import noop, noop_db

    task = noop if backend == "outbox" else noop_db
    with transaction.atomic(), CaptureQueriesContext(connection) as captured:
        task.enqueue()
    return [query["sql"].split()[0] for query in captured.captured_queries]


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} [{min(values):.0f}-{max(values):.0f}]"


def run(tasks: int, rounds: int, bulk: int, env: dict[str, str]) -> None:
    drain: dict[str, list[float]] = {backend: [] for backend in WORKERS}
    drain_net: dict[str, list[float]] = {backend: [] for backend in WORKERS}
    bulk_rates: dict[str, list[float]] = {backend: [] for backend in WORKERS}
    for round_ in range(rounds):
        order = list(WORKERS) if round_ % 2 == 0 else list(reversed(WORKERS))
        for backend in order:
            clear()
            empty = manage(env, *worker_args(backend, tasks))
            enqueue(backend, tasks)
            vacuum()
            seconds = manage(env, *worker_args(backend, tasks))
            done = finished(backend)
            assert done == tasks, f"{backend}: {done} of {tasks} tasks finished"
            drain[backend].append(tasks / seconds)
            drain_net[backend].append(tasks / max(seconds - empty, 1e-6))
            clear()
            bulk_rates[backend].append(enqueue(backend, bulk))
            clear()
            print(
                f"round {round_ + 1} {backend}: drain {tasks / seconds:.0f}/s "
                f"({seconds:.2f} s, empty run {empty:.2f} s), bulk enqueue "
                f"{bulk_rates[backend][-1]:.0f}/s",
                flush=True,
            )
    print(f"\n{tasks} no-op tasks, one worker, {rounds} rounds alternated; median [min-max]")
    for backend in WORKERS:
        print(
            f"  {backend:16} drain {summary(drain[backend])} tasks/s "
            f"(net of start-up: {summary(drain_net[backend])}); "
            f"bulk enqueue of {bulk} in one transaction: {summary(bulk_rates[backend])} tasks/s; "
            f"one enqueue: {', '.join(statements_of_one_enqueue(backend))}"
        )
    drain_ratio = _ratio(drain)
    print(f"  outbox / django-tasks-db drain: {drain_ratio:.1f}x ({_ratio(drain_net):.1f}x net)")
    loads = " ".join(f"{load:.2f}" for load in os.getloadavg())
    print(f"load average: {loads} on {os.cpu_count()} CPUs")


def _ratio(rates: dict[str, list[float]]) -> float:
    return statistics.median(rates["outbox"]) / statistics.median(rates["django-tasks-db"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bulk", type=int, default=10_000)
    parser.add_argument("--pg-database", default="tw_bench_tasks")
    options = parser.parse_args()
    url = f"postgres://postgres@127.0.0.1:5432/{options.pg_database}"
    env = bench_env(url)
    recreate(options.pg_database, create=True)
    try:
        manage(env, "migrate", "--verbosity", "0")
        os.environ.update(env)
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        run(options.tasks, options.rounds, options.bulk, env)
    finally:
        from django.db import connections

        connections.close_all()
        recreate(options.pg_database, create=False)


if __name__ == "__main__":
    main()
