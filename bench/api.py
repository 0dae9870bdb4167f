"""Throughput and latency of the projects API and of two list pages under gunicorn, against
a bare insert view.

    .venv/bin/python bench/api.py [--db sqlite|postgres|both] [--clients N] [--seconds S]
        [--rounds R] [--pg-database NAME]

For each database (a fresh SQLite file, or a PostgreSQL database it drops and re-creates,
`tw_bench_api` unless --pg-database says otherwise) it migrates, creates a tenant, starts
gunicorn on 127.0.0.1, gives the tenant enough projects and notifications (with recipients,
both channels, a rule and a time zone) for full pages of LIST_PAGE rows, and drives N client
threads for S seconds per endpoint, the endpoints interleaved in each of R rounds; req/s and
latencies are the median [min-max] of the rounds, each ratio is the median of each round's
endpoint / bare insert. Server CPU per request (the
gunicorn workers' and, on PostgreSQL, the bench database's backends' user + system time,
read from /proc) is the figure other load on a shared machine moves least. SQL per request
is counted in-process with CaptureQueriesContext around the same requests. It prints
figures and the load average; it never judges them.

Notification creates are driven for two tenants in each round: one without a plan and one on
a plan whose notifications_per_month is far away, so every create is counted against it
(tenancy.quotas); their ratio is what the plan's counting costs (goal: at least 0.9x).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.harness import (
    PYTHON,
    ROOT,
    WORKERS,
    bench_env,
    drive,
    drop_postgres_database,
    free_port,
    load,
    manage,
    recreate_postgres_database,
    server_cpu,
    start_gunicorn,
)

TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")
LIST_PAGE = 50
LISTS = {
    "projects": f"/v1/projects?limit={LIST_PAGE}",
    "notifications": f"/v1/notifications?limit={LIST_PAGE}",
}


def queries_per_request(token: str, planned_token: str) -> dict[str, tuple[int, int]]:
    """(data statements, all statements) per endpoint, through the Django test client."""
    import django

    django.setup()
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(headers={"Authorization": f"Bearer {token}"})
    planned = Client(headers={"Authorization": f"Bearer {planned_token}"})
    calls = {
        "create": lambda: client.post(
            "/v1/projects",
            {"name": "counted"},
            content_type="application/json",
            headers={"Idempotency-Key": str(uuid.uuid4())},
        ),
        **{name: (lambda path=path: client.get(path)) for name, path in LISTS.items()},
        "bare insert": lambda: client.post("/bench/bare-insert"),
        "notify": lambda: client.post(
            "/v1/notifications",
            NOTIFICATION,
            content_type="application/json",
            headers={"Idempotency-Key": str(uuid.uuid4())},
        ),
        "notify+plan": lambda: planned.post(
            "/v1/notifications",
            NOTIFICATION,
            content_type="application/json",
            headers={"Idempotency-Key": str(uuid.uuid4())},
        ),
    }
    counts = {}
    for name, call in calls.items():
        call()  # warm: token last_used_at, connection set-up
        with CaptureQueriesContext(connection) as context:
            call()
        verbs = [query["sql"].split()[0].upper() for query in context.captured_queries]
        data = [verb for verb in verbs if verb not in TRANSACTION_CONTROL]
        counts[name] = (len(data), len(verbs))
    return counts


def seed_lists(base: str, auth: dict[str, str]) -> None:
    """LIST_PAGE projects and LIST_PAGE notifications, created through the API."""
    session = requests.Session()

    def post(path: str, body: dict) -> dict:
        headers = {**auth, "Idempotency-Key": str(uuid.uuid4())}
        response = session.post(f"{base}{path}", json=body, headers=headers)
        response.raise_for_status()
        return response.json()

    endpoint = post("/v1/webhook-endpoints", {"url": "http://127.0.0.1:9/hook"})["id"]
    projects = [post("/v1/projects", {"name": f"Project {n}"})["id"] for n in range(LIST_PAGE)]
    for n in range(LIST_PAGE):
        post(
            "/v1/notifications",
            {
                "channels": ["email", "webhook"],
                "email_to": ["ops@example.com", f"team-{n}@example.com"],
                "webhook_endpoint": endpoint,
                "subject": f"Weekly report {n}",
                "body": "The weekly report is ready: open the dashboard to review it. " * 3,
                "fire_at": "2030-01-07T09:00:00",
                "rrule": "FREQ=WEEKLY;BYDAY=MO,WE;BYHOUR=9;BYMINUTE=0",
                "timezone": "Europe/Berlin",
                "project_id": projects[n],
            },
        )


PLANNED_QUOTA = 1_000_000_000
NOTIFICATION = {
    "channels": ["email"],
    "email_to": ["ops@example.com"],
    "subject": "Counted",
    "body": "A notification counted against the tenant's plan.",
    "fire_at": "2030-01-07T09:00:00",
}


def planned_tenant(env: dict[str, str]) -> str:
    """A second tenant, on a plan whose notification quota the bench never reaches: its
    owner's token."""
    grant = json.loads(
        manage(env, "create_tenant", "Planned", "--owner", "p@example.com", "--json")
    )
    manage(
        env,
        "shell",
        "-c",
        f"from tenancy.models import Plan; Plan.objects.create(name='bench', "
        f"notifications_per_month={PLANNED_QUOTA})",
    )
    manage(env, "set_plan", grant["tenant_id"], "bench")
    return grant["token"]


def fresh_tenant(db: str, pg_database: str) -> tuple[dict[str, str], str]:
    """A fresh, migrated database of `db` and its one tenant: (the bench's environment, the
    tenant's API token)."""
    if db == "postgres":
        recreate_postgres_database(pg_database)
        database_url = f"postgres://postgres@127.0.0.1:5432/{pg_database}"
    else:
        workdir = tempfile.mkdtemp(prefix="tw_bench_api_")
        database_url = f"sqlite:///{workdir}/bench.sqlite3"
    env = bench_env(database_url)
    os.environ.update(env)
    manage(env, "migrate", "--verbosity=0")
    grant = json.loads(manage(env, "create_tenant", "Bench", "--owner", "b@example.com", "--json"))
    return env, grant["token"]


def run_one(db: str, *, clients: int, seconds: float, rounds: int, pg_database: str) -> None:
    env, token = fresh_tenant(db, pg_database)
    planned_auth = {"Authorization": f"Bearer {planned_tenant(env)}"}
    port = free_port()
    server = start_gunicorn(env, port)
    base = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {token}"}

    def create(session: requests.Session) -> bool:
        headers = {**auth, "Idempotency-Key": str(uuid.uuid4())}
        return session.post(f"{base}/v1/projects", json={"name": "b"}, headers=headers).ok

    def bare(session: requests.Session) -> bool:
        return session.post(f"{base}/bench/bare-insert").ok

    def lister(path: str) -> Callable[[requests.Session], bool]:
        return lambda session: session.get(f"{base}{path}", headers=auth).ok

    def notify(tenant_auth: dict[str, str]) -> Callable[[requests.Session], bool]:
        def post(session: requests.Session) -> bool:
            headers = {**tenant_auth, "Idempotency-Key": str(uuid.uuid4())}
            return session.post(f"{base}/v1/notifications", json=NOTIFICATION, headers=headers).ok

        return post

    seed_lists(base, auth)
    # Every endpoint beside the bare insert: each ratio is taken within each round.
    calls = {
        "create": create,
        "bare insert": bare,
        **{name: lister(path) for name, path in LISTS.items()},
        "notify": notify(auth),
        "notify+plan": notify(planned_auth),
    }
    figures: dict[str, list[dict[str, float]]] = {name: [] for name in calls}
    cpu = server_cpu(server, pg_database if db == "postgres" else None)
    try:
        for _ in range(rounds):
            for name, call in calls.items():
                figures[name].append(drive(call, clients=clients, seconds=seconds, cpu=cpu))
    finally:
        server.terminate()
        server.wait(timeout=30)
    counts = queries_per_request(token, planned_auth["Authorization"].removeprefix("Bearer "))
    print_table(db, figures, counts, clients=clients, seconds=seconds)
    if db == "postgres":
        from django.db import connections

        connections.close_all()
        drop_postgres_database(pg_database)


def _spread(values: list[float], digits: int = 1) -> str:
    median, low, high = statistics.median(values), min(values), max(values)
    return f"{median:.{digits}f} [{low:.{digits}f}-{high:.{digits}f}]"


def print_table(
    db: str,
    figures: dict[str, list[dict[str, float]]],
    counts: dict,
    *,
    clients: int,
    seconds: float,
) -> None:
    rounds = len(figures["create"])
    print(
        f"\n{db}: gunicorn {WORKERS} sync workers, {clients} clients, {seconds:g} s each, "
        f"{rounds} rounds interleaved, median [min-max]; {load()}"
    )
    print(
        f"{'endpoint':<13} {'reqs':>6} {'errs':>5} {'req/s':>24} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'server CPU ms/req':>20} SQL"
    )
    for name, runs in figures.items():
        data, total = counts[name]
        print(
            f"{name:<13} {sum(run['requests'] for run in runs):>6.0f} "
            f"{sum(run['errors'] for run in runs):>5.0f} "
            f"{_spread([run['rps'] for run in runs]):>24} "
            f"{statistics.median(run['p50_ms'] for run in runs):>8.1f} "
            f"{statistics.median(run['p99_ms'] for run in runs):>8.1f} "
            f"{_spread([run['cpu_ms'] for run in runs], digits=2):>20} "
            f"{data} (+{total - data} txn)"
        )
    print_ratios(figures)
    print(f"SQL statements per create: {counts['create'][0]} (target <= 6)")
    for name in LISTS:
        print(f"SQL statements per {name} page of {LIST_PAGE}: {counts[name][0]}")
    planned = [
        plan["rps"] / bare["rps"]
        for plan, bare in zip(figures["notify+plan"], figures["notify"], strict=True)
    ]
    print(
        f"notification creates per second, tenant on a plan / tenant without: "
        f"{_ratio(planned)} (goal >= 0.9); SQL per create {counts['notify'][0]} without a "
        f"plan, {counts['notify+plan'][0]} with one"
    )


def print_ratios(figures: dict[str, list[dict[str, float]]]) -> None:
    """Each endpoint against the bare insert, round by round."""
    for name in ("create", *LISTS):
        ratios = [
            run["rps"] / bare["rps"]
            for run, bare in zip(figures[name], figures["bare insert"], strict=True)
        ]
        cpu_ratios = [
            bare["cpu_ms"] / run["cpu_ms"]
            for run, bare in zip(figures[name], figures["bare insert"], strict=True)
        ]
        print(
            f"{name} / bare insert throughput: {_ratio(ratios)} (target >= 0.5); "
            f"bare insert / {name} server CPU per request: {_ratio(cpu_ratios)}"
        )


def _ratio(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}x [{min(values):.2f}-{max(values):.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pg-database", default="tw_bench_api")
    args = parser.parse_args()
    if args.db == "both":
        # One process per database: Django is set up once per process.
        for db in ("sqlite", "postgres"):
            subprocess.run(
                [PYTHON, __file__, "--db", db, f"--clients={args.clients}",
                 f"--seconds={args.seconds}", f"--rounds={args.rounds}",
                 f"--pg-database={args.pg_database}"],
                check=True,
            )  # fmt: skip
        return
    sys.path.insert(0, str(ROOT))
    run_one(
        args.db,
        clients=args.clients,
        seconds=args.seconds,
        rounds=args.rounds,
        pg_database=args.pg_database,
    )


if __name__ == "__main__":
    main()
