"""API read throughput with and without a read replica (README: Scale), under gunicorn.

    .venv/bin/python bench/replica_reads.py [--replica-url postgres://postgres@127.0.0.1:5433/]
        [--clients N] [--seconds S] [--rounds R] [--pg-database NAME]

It makes a PostgreSQL database (`tw_bench_replica`, dropped and re-created) holding one
tenant with 50 projects, waits until the streaming replica (`.ci/replica.sh up` makes one on
port 5433) has replayed it, then drives `GET /v1/projects` (a page) and
`GET /v1/projects/{id}` from N client threads, S seconds each, in R interleaved rounds, once
with the primary alone and once with DATABASE_REPLICA_URLS set (reads without a bookmark).
Besides req/s it prints the CPU each database's backends spent per request: on one machine
a replica adds no cores, so what it buys shows as primary CPU moved off the primary. It
prints figures; it never judges them.
"""

import argparse
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.harness import (
    PG_ADMIN_URL,
    bench_env,
    cpu_seconds,
    drive,
    drop_postgres_database,
    free_port,
    load,
    manage,
    recreate_postgres_database,
    start_gunicorn,
)

PROJECTS = 50
# (base URL, auth headers) -> the reads to drive: name -> path
Seed = Callable[[str, dict[str, str]], dict[str, str]]


def backend_cpu(admin_url: str, database: str) -> dict[tuple[str, int], float]:
    """CPU seconds so far of each backend serving `database` on the server at `admin_url`."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        pids = [row[0] for row in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", [database]
        )]  # fmt: skip
    return {(admin_url, pid): used for pid in pids if (used := cpu_seconds(pid)) is not None}


def wait_replayed(replica_admin: str) -> None:
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as primary:
        target = primary.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
    with psycopg.connect(replica_admin, autocommit=True) as replica:
        while not replica.execute(
            "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [str(target)]
        ).fetchone()[0]:
            time.sleep(0.05)


def measure(env, token, paths, *, clients, seconds, database, replica_admin) -> dict:
    port = free_port()
    server = start_gunicorn(env, port)
    base, auth = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"}
    calls = {
        name: lambda session, path=path: session.get(f"{base}{path}", headers=auth).ok
        for name, path in paths.items()
    }
    runs = {}
    try:
        for name, call in calls.items():
            split = SplitCpu(database, replica_admin)
            runs[name] = drive(call, clients=clients, seconds=seconds, cpu=split)
            runs[name].update(split.per_request(runs[name]["requests"]))
        return runs
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replica-url", default="postgres://postgres@127.0.0.1:5433/")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pg-database", default="tw_bench_replica")
    args = parser.parse_args()
    figures = compare(
        args.pg_database, args.replica_url, create_projects,
        clients=args.clients, seconds=args.seconds, rounds=args.rounds,
    )  # fmt: skip
    print_figures(figures, args)


def compare(
    name: str, replica_url: str, seed: Seed, *, clients: int, seconds: float, rounds: int
) -> dict[tuple[str, str], list[dict]]:
    """In a fresh database `name` (dropped afterwards) one tenant, given data through the API
    by `seed`; once the replica at `replica_url` has replayed it, the reads `seed` names are
    driven with the primary alone and with the replica, in `rounds` interleaved rounds.
    Returns each (setup, read)'s runs."""
    replica = urlsplit(replica_url)
    replica_admin = urlunsplit(replica._replace(path="/postgres"))
    recreate_postgres_database(name)
    primary_env = bench_env(f"postgres://postgres@127.0.0.1:5432/{name}")
    manage(primary_env, "migrate", "--verbosity=0")
    grant = json.loads(manage(primary_env, "create_tenant", "B", "--owner", "b@x.io", "--json"))
    paths = seeded(primary_env, grant["token"], seed)
    wait_replayed(replica_admin)
    setups = {
        "primary only": primary_env,
        "with replica": {
            **primary_env,
            "DATABASE_REPLICA_URLS": urlunsplit(replica._replace(path=f"/{name}")),
        },
    }
    figures: dict[tuple[str, str], list[dict]] = {}
    for _ in range(rounds):
        for setup, env in setups.items():
            runs = measure(
                env, grant["token"], paths, clients=clients, seconds=seconds,
                database=name, replica_admin=replica_admin,
            )  # fmt: skip
            for endpoint, run in runs.items():
                figures.setdefault((setup, endpoint), []).append(run)
    drop_postgres_database(name)
    return figures


class SplitCpu:
    """Backend CPU of the primary and of the replica, apart: `drive` calls it before and
    after its run, and `per_request` splits that run's CPU by server."""

    def __init__(self, database: str, replica_admin: str) -> None:
        self.database, self.replica_admin, self.readings = database, replica_admin, []

    def __call__(self) -> dict:
        reading = {
            **backend_cpu(PG_ADMIN_URL, self.database),
            **backend_cpu(self.replica_admin, self.database),
        }
        self.readings.append(reading)
        return {}  # drive's own CPU figure is left at zero: per_request gives both

    def per_request(self, requests_made: int) -> dict[str, float]:
        before, after = self.readings[0], self.readings[-1]
        spent = {PG_ADMIN_URL: 0.0, self.replica_admin: 0.0}
        for key, used in after.items():
            spent[key[0]] += used - before.get(key, 0.0)
        scale = 1000 / max(1, requests_made)
        return {
            "primary_ms": spent[PG_ADMIN_URL] * scale,
            "replica_ms": spent[self.replica_admin] * scale,
        }


def seeded(env: dict[str, str], token: str, seed: Seed) -> dict[str, str]:
    """`seed` run against a gunicorn of its own: the reads it names, by name."""
    port = free_port()
    server = start_gunicorn(env, port)
    try:
        return seed(f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"})
    finally:
        server.terminate()
        server.wait(timeout=30)


def create_projects(base: str, auth: dict[str, str]) -> dict[str, str]:
    """PROJECTS projects; the reads: their first page and the last one alone."""
    for index in range(PROJECTS):
        answer = requests.post(
            f"{base}/v1/projects",
            json={"name": f"p{index}"},
            headers={**auth, "Idempotency-Key": str(uuid.uuid4())},
            timeout=30,
        )
        answer.raise_for_status()
    project = answer.headers["Location"].rsplit("/", 1)[1]
    return {"list": "/v1/projects", "detail": f"/v1/projects/{project}"}


def print_figures(figures: dict, args: argparse.Namespace) -> None:
    print(
        f"\nAPI reads, gunicorn, {args.clients} clients, {args.seconds:g} s each, "
        f"{args.rounds} rounds interleaved, median [min-max]; {load()}"
    )
    print(f"{'setup':<14} {'endpoint':<13} {'req/s':>22} {'p50 ms':>7} "
          f"{'primary CPU ms/req':>19} {'replica CPU ms/req':>19}")  # fmt: skip
    for (setup, endpoint), runs in figures.items():
        rps = [run["rps"] for run in runs]
        print(
            f"{setup:<14} {endpoint:<13} "
            f"{statistics.median(rps):>8.1f} [{min(rps):.1f}-{max(rps):.1f}]".ljust(52)
            + f" {statistics.median(run['p50_ms'] for run in runs):>7.1f}"
            f" {statistics.median(run['primary_ms'] for run in runs):>19.2f}"
            f" {statistics.median(run['replica_ms'] for run in runs):>19.2f}"
        )


if __name__ == "__main__":
    main()
