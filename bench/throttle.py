"""The user rate limit through `gunicorn -w 3`: requests let through ÷ the limit (goal ≤ 1.1).

    .venv/bin/python bench/throttle.py [--db sqlite|postgres|both] [--limit N] [--requests M]
        [--clients C] [--pg-database NAME]

For each database (a fresh SQLite file, or a PostgreSQL database it re-creates and drops afterwards,
`tw_bench_throttle` unless --pg-database says otherwise) it migrates, creates a tenant,
starts gunicorn with THROTTLE_RATE_USER=<limit>/hour and sends M requests to GET /v1/me
from C client threads, each request on a new connection. It prints how many were let
through, the ratio to the limit, the 429s, the workers that answered and the throughput;
it never judges them.
"""

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import drop_postgres_database, recreate_postgres_database  # noqa: E402
from tests.support.gunicorn import (  # noqa: E402
    Served,
    app_env,
    connect,
    gunicorn,
    manage,
    read_answer,
)


def hammer(served: Served, token: str, *, requests: int, clients: int) -> Counter:
    head = (
        f"GET /v1/me HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        f"Authorization: Bearer {token}\r\n\r\n"
    ).encode()
    statuses: Counter = Counter()
    lock = threading.Lock()
    remaining = iter(range(requests))

    def client() -> None:
        while True:
            with lock:
                if next(remaining, None) is None:
                    return
            with connect(served.port) as connection:
                connection.sendall(head)
                status = read_answer(connection).status
            with lock:
                statuses[status] += 1

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


def run_one(db: str, *, limit: int, requests: int, clients: int, pg_database: str) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="tw_bench_throttle_"))
    if db == "postgres":
        recreate_postgres_database(pg_database)
        database_url = f"postgres://postgres@127.0.0.1:5432/{pg_database}"
    else:
        database_url = f"sqlite:///{workdir / 'bench.sqlite3'}"
    env = app_env(database_url, THROTTLE_RATE_USER=f"{limit}/hour")
    manage(env, "migrate", "--verbosity=0")
    grant = json.loads(manage(env, "create_tenant", "Bench", "--owner", "t@example.com", "--json"))
    with gunicorn(env, workdir) as served:
        began = time.perf_counter()
        statuses = hammer(served, grant["token"], requests=requests, clients=clients)
        elapsed = time.perf_counter() - began
        workers = len(served.worker_pids())
    if db == "postgres":
        drop_postgres_database(pg_database)
    passed = statuses[200]
    print(
        f"{db}: gunicorn {served.workers} sync workers ({workers} answered), {clients} clients, "
        f"{requests} requests on new connections, limit {limit}/hour: let through {passed}, "
        f"let through / limit = {passed / limit:.2f} (goal <= 1.1), 429: {statuses[429]}, "
        f"other: {sum(statuses.values()) - passed - statuses[429]}, "
        f"{requests / elapsed:.0f} req/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--pg-database", default="tw_bench_throttle")
    args = parser.parse_args()
    for db in ("sqlite", "postgres") if args.db == "both" else (args.db,):
        run_one(
            db,
            limit=args.limit,
            requests=args.requests,
            clients=args.clients,
            pg_database=args.pg_database,
        )


if __name__ == "__main__":
    main()
