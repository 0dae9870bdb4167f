"""Throughput of the front door under gunicorn, beside a bare insert view in the same run:
`POST /v1/signup` (its Turnstile check against a local stand-in siteverify included),
`POST /v1/signup/verify` and `POST /v1/invitations/accept`, and the SQL statements of each.

    .venv/bin/python bench/front_door.py [--db sqlite|postgres] [--clients N] [--seconds S]
        [--rounds R] [--pg-database NAME]

The tokens verify and accept spend are made beforehand in this process (the services that
the signup and invite calls use), as many as the run can spend; each is spent once. The
server runs bench/api.py's gunicorn set-up; req/s and CPU per request are its measures. It
prints figures; it never judges them.
"""

import argparse
import json
import sys
import threading
import uuid
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.api import TRANSACTION_CONTROL  # noqa: E402
from bench.harness import (  # noqa: E402
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

# More than a client spends per second; a pool that runs dry shows up as errors.
TOKENS_PER_SECOND_PER_CLIENT = 60


def token_pool(kind: str, count: int, tenant_id: str) -> list[str]:
    """`count` unspent verification or invitation tokens."""
    from django.conf import settings
    from django.utils import timezone

    from onboarding.signups import signup_request_record
    from tenancy import link_tokens
    from tenancy.invitations import invitation_issue
    from tenancy.models import Tenant

    now, tenant = timezone.now(), Tenant.objects.get(pk=tenant_id)
    addresses = [f"{uuid.uuid4().hex}@example.com" for _ in range(count)]
    if kind == "verify":
        references = [
            signup_request_record(email=email, tenant_name="b", address="", now=now)
            for email in addresses
        ]
    else:
        references = [
            invitation_issue(
                tenant=tenant, email=email, role="member", invited_by=None, now=now
            ).link
            for email in addresses
        ]
    # The tokens the emails would carry, derived as the tick does when it sends them.
    return [
        link_tokens.render(reference, recipients=[email], secret=settings.SECRET_KEY)
        for reference, email in zip(references, addresses, strict=True)
    ]


def statements(call) -> tuple[int, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as context:
        call()
    verbs = [query["sql"].split()[0].upper() for query in context.captured_queries]
    return len([verb for verb in verbs if verb not in TRANSACTION_CONTROL]), len(verbs)


def counts(tenant_id: str) -> dict[str, tuple[int, int]]:
    from django.test import Client

    client = Client()

    def post(path: str, body: dict):
        return lambda: client.post(path, body, content_type="application/json")

    signup = {"email": "counted@example.com", "tenant_name": "c", "captcha_token": "x"}
    [verify] = token_pool("verify", 1, tenant_id)
    [accept] = token_pool("accept", 1, tenant_id)
    client.post("/bench/bare-insert")  # warm the connection
    return {
        "signup": statements(post("/v1/signup", signup)),
        "verify": statements(post("/v1/signup/verify", {"token": verify})),
        "accept": statements(post("/v1/invitations/accept", {"token": accept})),
        "bare insert": statements(lambda: client.post("/bench/bare-insert")),
    }


def run(db: str, *, clients: int, seconds: float, rounds: int, pg_database: str) -> None:
    import os
    import tempfile

    from operations.demo.siteverify import PASSING_SECRET, SITEVERIFY_PATH, siteverify_server

    siteverify = siteverify_server(host="127.0.0.1", port=0)
    threading.Thread(target=siteverify.serve_forever, daemon=True).start()
    if db == "postgres":
        recreate_postgres_database(pg_database)
        database_url = f"postgres://postgres@127.0.0.1:5432/{pg_database}"
    else:
        database_url = f"sqlite:///{tempfile.mkdtemp(prefix='tw_bench_fd_')}/bench.sqlite3"
    env = {
        **bench_env(database_url),
        "SIGNUP_ENABLED": "true",
        "SIGNUP_RATE_IP": "100000000/s",
        "TURNSTILE_SECRET_KEY": PASSING_SECRET,
        "TURNSTILE_VERIFY_URL": f"http://127.0.0.1:{siteverify.server_port}{SITEVERIFY_PATH}",
        "TURNSTILE_HOSTNAMES": "example.com",
    }
    os.environ.update(env)
    manage(env, "migrate", "--verbosity=0")
    owner = json.loads(manage(env, "create_tenant", "Bench", "--owner", "b@example.com", "--json"))
    import django

    django.setup()
    spendable = int(clients * seconds * rounds * TOKENS_PER_SECOND_PER_CLIENT)
    pools = {kind: token_pool(kind, spendable, owner["tenant_id"]) for kind in ("verify", "accept")}
    lock = threading.Lock()

    def spend(kind: str) -> str:
        with lock:
            return pools[kind].pop() if pools[kind] else "spent"

    port = free_port()
    server = start_gunicorn(env, port)
    base = f"http://127.0.0.1:{port}"

    def signup(session: requests.Session) -> bool:
        body = {"email": f"{uuid.uuid4().hex}@example.com", "tenant_name": "b",
                "captcha_token": "XXXX.DUMMY.TOKEN.XXXX"}  # fmt: skip
        return session.post(f"{base}/v1/signup", json=body).status_code == 202

    def verify(session: requests.Session) -> bool:
        body = {"token": spend("verify")}
        return session.post(f"{base}/v1/signup/verify", json=body).status_code == 201

    def accept(session: requests.Session) -> bool:
        body = {"token": spend("accept")}
        return session.post(f"{base}/v1/invitations/accept", json=body).status_code == 200

    def bare(session: requests.Session) -> bool:
        return session.post(f"{base}/bench/bare-insert").ok

    calls = {"signup": signup, "verify": verify, "accept": accept, "bare insert": bare}
    figures: dict[str, list[dict]] = {name: [] for name in calls}
    cpu = server_cpu(server, pg_database if db == "postgres" else None)
    try:
        for _ in range(rounds):
            for name, call in calls.items():
                figures[name].append(drive(call, clients=clients, seconds=seconds, cpu=cpu))
    finally:
        server.terminate()
        server.wait(timeout=30)
    report(db, figures, counts(owner["tenant_id"]), clients=clients, seconds=seconds)
    siteverify.shutdown()
    if db == "postgres":
        from django.db import connections

        connections.close_all()
        drop_postgres_database(pg_database)


def report(db: str, figures: dict, sql: dict, *, clients: int, seconds: float) -> None:
    import statistics

    print(f"\n{db}: {clients} clients, {seconds:g} s per endpoint per round; {load()}")
    print(f"{'endpoint':<12} {'reqs':>6} {'errs':>5} {'req/s':>9} {'x bare':>7} "
          f"{'p50 ms':>7} {'CPU ms/req':>11} SQL")  # fmt: skip
    for name, runs in figures.items():
        ratio = statistics.median(
            run["rps"] / bare["rps"] for run, bare in zip(runs, figures["bare insert"], strict=True)
        )
        data, total = sql[name]
        print(
            f"{name:<12} {sum(r['requests'] for r in runs):>6.0f} "
            f"{sum(r['errors'] for r in runs):>5.0f} "
            f"{statistics.median(r['rps'] for r in runs):>9.1f} {ratio:>7.2f} "
            f"{statistics.median(r['p50_ms'] for r in runs):>7.1f} "
            f"{statistics.median(r['cpu_ms'] for r in runs):>11.2f} {data} (+{total - data} txn)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pg-database", default="tw_bench_front_door")
    args = parser.parse_args()
    run(
        args.db,
        clients=args.clients,
        seconds=args.seconds,
        rounds=args.rounds,
        pg_database=args.pg_database,
    )


if __name__ == "__main__":
    main()
