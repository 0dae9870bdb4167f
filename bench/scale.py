"""Scale-out on one PostgreSQL (README: Scale): tick processes, read replicas, connections.

    .venv/bin/python bench/scale.py [--scenario ticks|reads|connections|all]
        [--tenants T] [--rows-per-tenant R] [--processes 1 2 4]
        [--replica-url postgres://postgres@127.0.0.1:5433/] [--clients N] [--seconds S]
        [--rounds R] [--web-workers W] [--web-threads T] [--ticks K] [--consumers J]
        [--load-seconds S] [--pooler-url postgres://postgres@127.0.0.1:6432/]
        [--pg-database NAME]

ticks (bench/scale_ticks.py): one burst of T x R due one-shot webhook rows (200 x 100 =
20,000), each tenant with its own endpoint on one local receiver process, drained by 1, 2
and 4 `run_tick --loop` processes started at once (a fresh burst each time): wall time,
deliveries/s, the ratio to one process, the CPU the database, the receiver and the ticks
spent meanwhile, which of them was the limit, and whether every row arrived exactly once.

reads: API read requests/s (a page of GET /v1/notifications and of GET /v1/projects, and
GET /v1/projects/{id} beside them) through gunicorn, the primary alone and with
DATABASE_REPLICA_URLS set: bench/replica_reads.py's comparison, with each server's CPU per
request. Skipped, saying so, when no streaming replica answers (`.ci/replica.sh up`).

connections (bench/scale_connections.py): server connections per kind of process — gunicorn
workers, `run_tick --loop`, `consume_jobs --loop` polling and with DATABASE_LISTEN_URL —
under API, tick and job load, straight to PostgreSQL and through a transaction-mode
PgBouncer (`.ci/pgbouncer.sh`; that half is skipped, saying so, when it does not answer).

Each scenario uses a PostgreSQL database on 127.0.0.1:5432 that it drops and re-creates
(`tw_bench_scale` unless --pg-database says otherwise) and prints the machine's cores and
load average first. It prints figures; it never judges them.
"""

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import replica_reads, scale_connections, scale_ticks
from bench.api import LISTS, seed_lists
from bench.harness import PYTHON, drop_postgres_database, load
from bench.scale_db import fresh_database

SCENARIOS = ("ticks", "reads", "connections")


def reads(args: argparse.Namespace) -> None:
    if not replica_streaming(args.replica_url):
        print(
            f"reads: no streaming replica answers at {args.replica_url} "
            "(`.ci/replica.sh up`, as root, makes one): skipped"
        )
        return
    figures = replica_reads.compare(
        args.pg_database, args.replica_url, seed_pages,
        clients=args.clients, seconds=args.seconds, rounds=args.rounds,
    )  # fmt: skip
    replica_reads.print_figures(figures, args)
    for endpoint in dict.fromkeys(endpoint for _, endpoint in figures):
        alone, helped = (
            statistics.median(run["rps"] for run in figures[setup, endpoint])
            for setup in ("primary only", "with replica")
        )
        print(f"{endpoint}: with replica / primary only {helped / alone:.2f}x req/s")


def seed_pages(base: str, auth: dict[str, str]) -> dict[str, str]:
    """A full page of projects and of notifications; the reads: those two pages, and one
    project alone (a read that is not a list page, for comparison)."""
    seed_lists(base, auth)
    page = requests.get(f"{base}{LISTS['projects']}", headers=auth, timeout=30)
    page.raise_for_status()
    return {**LISTS, "project": f"/v1/projects/{page.json()['results'][0]['id']}"}


def replica_streaming(url: str) -> bool:
    admin = urlunsplit(urlsplit(url)._replace(path="/postgres"))
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=3) as conn:
            return conn.execute(
                "SELECT pg_is_in_recovery() AND EXISTS ("
                " SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming')"
            ).fetchone()[0]
    except psycopg.Error:
        return False


def run(scenario: str, args: argparse.Namespace) -> None:
    print(f"\n== {scenario}: {os.cpu_count()} cores; {load()} at start", flush=True)
    if scenario == "reads":
        reads(args)
        return
    env = fresh_database(args.pg_database)
    try:
        if scenario == "ticks":
            scale_ticks.run(env, args)
        else:
            scale_connections.run(env, args)
    finally:
        from django.db import connections

        connections.close_all()
        drop_postgres_database(args.pg_database)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="all")
    parser.add_argument("--pg-database", default="tw_bench_scale")
    parser.add_argument("--tenants", type=int, default=200)
    parser.add_argument("--rows-per-tenant", type=int, default=100)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--replica-url", default="postgres://postgres@127.0.0.1:5433/")
    parser.add_argument("--clients", type=int, default=8, help="reads/connections: clients")
    parser.add_argument("--seconds", type=float, default=5.0, help="reads: seconds a run")
    parser.add_argument("--rounds", type=int, default=3, help="reads: interleaved rounds")
    parser.add_argument("--web-workers", type=int, default=5, help="connections: gunicorn")
    parser.add_argument("--web-threads", type=int, default=1, help="connections: gunicorn")
    parser.add_argument("--ticks", type=int, default=4, help="connections: run_tick processes")
    parser.add_argument("--consumers", type=int, default=2, help="connections: of each kind")
    parser.add_argument("--load-seconds", type=float, default=15.0, help="connections: load")
    parser.add_argument("--pooler-url", default="postgres://postgres@127.0.0.1:6432/")
    args = parser.parse_args()
    if args.scenario != "all":
        run(args.scenario, args)
        return
    # One process per scenario: Django is set up once per process, on that one's database.
    for scenario in SCENARIOS:
        subprocess.run([PYTHON, __file__, *sys.argv[1:], "--scenario", scenario], check=True)


if __name__ == "__main__":
    main()
