"""Publish to receiver: how long after `POST /v1/messages` is answered does the receiver get
the message, with `run_tick --loop` run as the README runs it? Prints figures; never judges.

    .venv/bin/python bench/latency.py [--rates 20 200] [--seconds 10] [--no-listen]
        [--interval 60] [--pg-database bench_latency]

PostgreSQL only (LISTEN/NOTIFY): the database --pg-database is DROPPED and re-created. One
tenant, one endpoint on a local receiver (bench/tick_sink.py, which logs the time each
request's headers arrived), gunicorn (3 workers) and one `run_tick --loop --interval 60`
with DATABASE_LISTEN_URL set (--no-listen: unset, the loop waits out its interval, as before
the tick listened). For each rate, messages are published open-loop at that rate for
--seconds; then as many one-shot webhook notifications due now through
`POST /v1/notifications`. Per kind and rate it prints p50, p95, p99 and max of (receiver's
arrival minus the client's receipt of the 2xx answer), and how many were lost or repeated. Last,
the looping tick's CPU while nothing is due, as a share of one core over 30 s.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import (  # noqa: E402
    PYTHON,
    bench_env,
    cpu_seconds,
    drop_postgres_database,
    free_port,
    load,
    manage,
    recreate_postgres_database,
    start_gunicorn,
)
from bench.load_tick import arrivals, start_recording_sink  # noqa: E402

EVENT_TYPE = "invoice.paid"
PUBLISHERS = 16
SETTLE_SECONDS = 90


def seed(env: dict[str, str], sink_url: str) -> tuple[str, str, str]:
    """A tenant with an owner's token, an event type and one endpoint on the receiver:
    (tenant id, token, endpoint id)."""
    os.environ.update(env)
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from delivery.models import WebhookEndpoint
    from delivery.transports.signing import generate_secret
    from tenancy.models import ApiToken, Membership, Role, Tenant
    from webhooks.event_types import event_type_create

    tenant = Tenant.objects.create(name="latency")
    user = get_user_model().objects.create(username="latency", email="latency@example.com")
    Membership.objects.create(tenant=tenant, user=user, role=Role.OWNER)
    token = ApiToken.issue(user=user, name="latency")[1]
    event_type_create(tenant=tenant, name=EVENT_TYPE)
    endpoint = WebhookEndpoint.objects.create(tenant=tenant, url=sink_url, secret=generate_secret())
    return str(tenant.id), token, str(endpoint.id)


def publish_at_rate(
    base: str, headers: dict[str, str], *, kind: str, rate: int, seconds: float, endpoint: str
) -> dict[str, float]:
    """Open-loop requests at `rate` a second: {webhook-id the receiver will see: the time the
    client had the 2xx answer}."""
    answered: dict[str, float] = {}
    lock = threading.Lock()
    local = threading.local()
    start = time.time() + 0.5

    def one(n: int) -> None:
        session = getattr(local, "session", None)
        if session is None:
            session = local.session = requests.Session()
        delay = start + n / rate - time.time()
        if delay > 0:
            time.sleep(delay)
        keyed = {**headers, "Idempotency-Key": str(uuid.uuid4())}
        if kind == "message":
            body: dict = {"event_type": EVENT_TYPE, "payload": {"n": n}}
            response = session.post(f"{base}/v1/messages", json=body, headers=keyed)
            at = time.time()
            response.raise_for_status()
            webhook_id = f"msg_{response.json()['id']}"
        else:
            body = {
                "channels": ["webhook"],
                "webhook_endpoint": endpoint,
                "subject": f"n{n}",
                "body": "due now",
            }
            response = session.post(f"{base}/v1/notifications", json=body, headers=keyed)
            at = time.time()
            if response.status_code != 201:
                raise SystemExit(f"POST /v1/notifications: {response.status_code} {response.text}")
            webhook_id = f"notification_{response.json()['id']}_1"
        with lock:
            answered[webhook_id] = at

    with ThreadPoolExecutor(PUBLISHERS) as pool:
        list(pool.map(one, range(int(rate * seconds))))
    return answered


def report(label: str, answered: dict[str, float], log: Path) -> None:
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline:
        seen = {msg_id for _, msg_id in arrivals(log)}
        if set(answered) <= seen:
            break
        time.sleep(0.2)
    first: dict[str, float] = {}
    count: Counter = Counter()
    for at, msg_id in arrivals(log):
        if msg_id in answered:
            count[msg_id] += 1
            first.setdefault(msg_id, at)
    delays = sorted(first[msg_id] - answered[msg_id] for msg_id in first)
    lost = len(answered) - len(first)
    repeated = sum(1 for n in count.values() if n > 1)
    if not delays:
        print(f"{label}: nothing arrived ({lost} lost)")
        return
    quantiles = statistics.quantiles(delays, n=100) if len(delays) > 1 else delays * 99
    print(
        f"{label}: p50 {statistics.median(delays):.3f}s p95 {quantiles[94]:.3f}s "
        f"p99 {quantiles[98]:.3f}s max {delays[-1]:.3f}s; {len(answered)} sent, "
        f"{lost} lost, {repeated} repeated ({load()})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", type=int, nargs="+", default=[20, 200])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=60.0)
    parser.add_argument("--no-listen", action="store_true")
    parser.add_argument("--pg-database", default="bench_latency")
    args = parser.parse_args()

    url = f"postgres://postgres@127.0.0.1:5432/{args.pg_database}"
    recreate_postgres_database(args.pg_database)
    env = bench_env(url)
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    env["WEBHOOK_ALLOW_PRIVATE_TARGETS"] = "true"
    if not args.no_listen:
        env["DATABASE_LISTEN_URL"] = url
    manage(env, "migrate")
    log = Path(tempfile.gettempdir()) / f"tw_bench_latency_{os.getpid()}.log"
    log.unlink(missing_ok=True)
    sink, sink_url = start_recording_sink(log)
    port = free_port()
    server = tick = None
    try:
        tenant, token, endpoint = seed(env, sink_url)
        server = start_gunicorn(env, port)
        tick = subprocess.Popen(
            [PYTHON, "manage.py", "run_tick", "--loop", "--interval", str(args.interval)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        time.sleep(3)  # its first (empty) tick
        base = f"http://127.0.0.1:{port}"
        headers = {"Authorization": f"Bearer {token}", "X-Tenant-ID": tenant}
        mode = "without LISTEN" if args.no_listen else "with DATABASE_LISTEN_URL"
        print(f"run_tick --loop --interval {args.interval:g}, {mode}")
        for rate in args.rates:
            for kind in ("message", "one-shot"):
                answered = publish_at_rate(
                    base, headers, kind=kind, rate=rate, seconds=args.seconds, endpoint=endpoint
                )
                report(f"{kind:8} at {rate:>3}/s", answered, log)
        time.sleep(2)
        before = cpu_seconds(tick.pid) or 0.0
        time.sleep(30)
        idle = (cpu_seconds(tick.pid) or 0.0) - before
        print(f"idle looping tick: {100 * idle / 30:.2f}% of a core over 30 s")
    finally:
        for process in (tick, server, sink):
            if process is not None:
                process.terminate()
                process.wait()
        drop_postgres_database(args.pg_database)


if __name__ == "__main__":
    main()
