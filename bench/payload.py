"""What one large message costs (README: "Sending webhooks to your customers"): the bytes a
256 KiB payload published to 100 endpoints stores and the WAL it writes, and how long its
POST /v1/messages takes, alone and six at once with a /healthz behind them. Prints figures;
never judges.

    .venv/bin/python bench/payload.py [--endpoints 100] [--posts 20] [--parallel 6]
        [--payload-kib 256] [--pg-database tw_bench_payload]

PostgreSQL only (the figures are its own). The database is DROPPED and re-created and
migrated; a tenant gets --endpoints enabled endpoints and an event type, all through the
API of gunicorn on 127.0.0.1 (no tick runs, so nothing is sent). Then:

- stored: for each of --posts sequential publishes of a payload of just under --payload-kib
  of JSON (random text, which compresses about as little as real data), the growth of the
  message and delivery tables (pg_total_relation_size: heap, TOAST and indexes), of the
  idempotency keys' table (the stored answer), and of the WAL (pg_current_wal_lsn) across
  the request. The WAL is the whole cluster's: other databases' writes meanwhile add to it,
  so the lowest figure is the closest to this request's own.
- latency: the median and p95 of those POSTs.
- parallel: --parallel publishes sent at once and a /healthz sent just after them, each one's
  time (gunicorn has bench.harness.WORKERS sync workers, so the /healthz waits for one).
"""

import argparse
import json
import secrets
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.harness import (
    PG_ADMIN_URL,
    WORKERS,
    bench_env,
    drop_postgres_database,
    free_port,
    load,
    manage,
    recreate_postgres_database,
    start_gunicorn,
)

MESSAGE_TABLE = "notifications_message"
DELIVERY_TABLE = "notifications_notification"
KEY_TABLE = "tenancy_operationkey"
EVENT_TYPE = "bench.payload"


def payload_of(kib: int) -> dict:
    """A JSON object of just under `kib` KiB once compact: records of random text."""
    limit = kib * 1024 - 64
    items, size = [], len('{"items":[]}')
    while True:
        item = {"id": len(items), "note": secrets.token_urlsafe(180)}
        cost = len(json.dumps(item, separators=(",", ":"))) + 1
        if size + cost > limit:
            return {"items": items}
        items.append(item)
        size += cost


class Sizes:
    """Table sizes and the WAL position, read on the bench database."""

    def __init__(self, database: str) -> None:
        import psycopg

        url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{database}"
        self.conn = psycopg.connect(url, autocommit=True)

    def now(self) -> dict[str, int]:
        tables = (MESSAGE_TABLE, DELIVERY_TABLE, KEY_TABLE)
        row = self.conn.execute(
            "SELECT " + ", ".join(f"pg_total_relation_size('{t}')" for t in tables) + ", "
            "pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint"
        ).fetchone()
        assert row is not None
        return dict(zip((*tables, "wal"), row, strict=True))

    def close(self) -> None:
        self.conn.close()


def _post(session: requests.Session, base: str, auth: dict, body: bytes) -> float:
    headers = {**auth, "Idempotency-Key": str(uuid.uuid4()), "Content-Type": "application/json"}
    started = time.perf_counter()
    response = session.post(f"{base}/v1/messages", data=body, headers=headers)
    elapsed = time.perf_counter() - started
    if response.status_code != 202:
        raise SystemExit(f"POST /v1/messages answered {response.status_code}: {response.text}")
    return elapsed


def seed(base: str, auth: dict, endpoints: int) -> None:
    session = requests.Session()

    def post(path: str, body: dict) -> None:
        headers = {**auth, "Idempotency-Key": str(uuid.uuid4())}
        response = session.post(f"{base}{path}", json=body, headers=headers)
        if not response.ok:
            raise SystemExit(f"POST {path} answered {response.status_code}: {response.text}")

    post("/v1/event-types", {"name": EVENT_TYPE})
    for n in range(endpoints):
        post("/v1/webhook-endpoints", {"url": f"http://127.0.0.1:9/hook/{n}"})


def sequential(base: str, auth: dict, body: bytes, sizes: Sizes, posts: int) -> None:
    session = requests.Session()
    _post(session, base, auth, body)  # warm: connections, the token's last use
    times, grown = [], []
    for _ in range(posts):
        before = sizes.now()
        times.append(_post(session, base, auth, body))
        after = sizes.now()
        grown.append({name: after[name] - before[name] for name in before})
    kib = len(body) / 1024
    print(f"stored per publish of {kib:.0f} KiB (median [min-max] over {posts}), KiB:")
    for name in (MESSAGE_TABLE, DELIVERY_TABLE, KEY_TABLE, "wal"):
        values = [g[name] / 1024 for g in grown]
        print(
            f"  {name:<28} {statistics.median(values):>10.1f} [{min(values):.1f}-{max(values):.1f}]"
        )
    stored = [(g[MESSAGE_TABLE] + g[DELIVERY_TABLE]) / 1024 for g in grown]
    print(
        f"  message + deliveries         {statistics.median(stored):>10.1f} KiB "
        f"({statistics.median(stored) / kib:.2f}x the payload)"
    )
    quantiles = statistics.quantiles(times, n=20)
    print(
        f"POST /v1/messages latency over {posts}: median {1000 * statistics.median(times):.0f} "
        f"ms, p95 {1000 * quantiles[18]:.0f} ms, max {1000 * max(times):.0f} ms"
    )


def parallel(base: str, auth: dict, body: bytes, count: int) -> None:
    times: dict[str, float] = {}
    start = threading.Barrier(count + 1)

    def publish(n: int) -> None:
        session = requests.Session()
        start.wait()
        times[f"publish {n}"] = _post(session, base, auth, body)

    def health() -> None:
        start.wait()
        time.sleep(0.05)  # behind the publishes
        started = time.perf_counter()
        status = requests.get(f"{base}/healthz", timeout=60).status_code
        times[f"/healthz ({status})"] = time.perf_counter() - started

    threads = [threading.Thread(target=publish, args=(n,)) for n in range(count)]
    threads.append(threading.Thread(target=health))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    publishes = [seconds for name, seconds in times.items() if name.startswith("publish")]
    healthz = next(
        (name, seconds) for name, seconds in times.items() if name.startswith("/healthz")
    )
    print(
        f"{count} publishes at once ({WORKERS} gunicorn workers): "
        + ", ".join(f"{1000 * seconds:.0f}" for seconds in sorted(publishes))
        + f" ms; {healthz[0]} behind them: {1000 * healthz[1]:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoints", type=int, default=100)
    parser.add_argument("--posts", type=int, default=20)
    parser.add_argument("--parallel", type=int, default=6)
    parser.add_argument("--payload-kib", type=int, default=256)
    parser.add_argument("--pg-database", default="tw_bench_payload")
    args = parser.parse_args()

    recreate_postgres_database(args.pg_database)
    env = bench_env(f"postgres://postgres@127.0.0.1:5432/{args.pg_database}")
    manage(env, "migrate", "--verbosity=0")
    grant = json.loads(manage(env, "create_tenant", "Bench", "--owner", "b@example.com", "--json"))
    auth = {"Authorization": f"Bearer {grant['token']}"}
    port = free_port()
    server = start_gunicorn(env, port)
    base = f"http://127.0.0.1:{port}"
    sizes = Sizes(args.pg_database)
    try:
        seed(base, auth, args.endpoints)
        body = json.dumps(
            {"event_type": EVENT_TYPE, "payload": payload_of(args.payload_kib)},
            separators=(",", ":"),
        ).encode()
        print(f"\npostgresql: {args.endpoints} endpoints; {load()}")
        sequential(base, auth, body, sizes, args.posts)
        parallel(base, auth, body, args.parallel)
    finally:
        sizes.close()
        server.terminate()
        server.wait(timeout=30)
        drop_postgres_database(args.pg_database)


if __name__ == "__main__":
    main()
