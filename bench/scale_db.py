"""Database helpers for bench/scale.py: its fresh database, and which server processes and
connections serve it."""

import os

import psycopg

from bench.harness import PG_ADMIN_URL, bench_env, manage, recreate_postgres_database

# The bench's own connections carry this application_name, so that neither its polling nor
# its seeding is counted as the product's work or connections.
BENCH_APPLICATION = "tw-scale-bench"


def fresh_database(name: str) -> dict[str, str]:
    """Drop, re-create and migrate `name` and point this process's Django at it; returns the
    environment the product's processes get."""
    recreate_postgres_database(name)
    env = bench_env(f"postgres://postgres@127.0.0.1:5432/{name}")
    manage(env, "migrate", "--verbosity=0")
    os.environ.update(env)
    os.environ["DATABASE_URL"] = f"{env['DATABASE_URL']}?application_name={BENCH_APPLICATION}"
    import django

    django.setup()
    return env


def server_processes(admin: psycopg.Connection, database: str) -> list[int]:
    """The pids of `database`'s backends and of the server's background processes (WAL
    writer, checkpointer, the replica's WAL sender…), which work for whoever writes."""
    rows = admin.execute(
        "SELECT pid FROM pg_stat_activity"
        " WHERE (datname = %(db)s OR (datname IS NULL AND backend_type <> 'client backend'))"
        " AND application_name <> %(bench)s",
        {"db": database, "bench": BENCH_APPLICATION},
    ).fetchall()
    return [pid for (pid,) in rows]


def admin_connection() -> psycopg.Connection:
    return psycopg.connect(PG_ADMIN_URL, autocommit=True)
