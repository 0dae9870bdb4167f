"""Paced deliveries: what a webhook endpoint's `rate_limit` and a plan's
`deliveries_per_second` cost the tick while a backlog waits for its slots.

    .venv/bin/python bench/rate_slots.py [--db sqlite|postgres|both] [--rows N] [--rate R]
        [--seconds S] [--ticks T]

For each database (a fresh SQLite file, or the PostgreSQL database tw_bench_tick or the one
BENCH_TICK_DB names, created and dropped) and each case — N messages due at once to one
endpoint with `rate_limit: R`, then N due at once for a tenant whose plan sets
`deliveries_per_second: R` (its endpoint unlimited) — it starts T `run_tick --loop
--interval 2` processes (as the README runs the scheduler) against a real HTTP receiver on
127.0.0.1, lets them run S seconds from the first delivery, stops them and prints: the
deliveries per second the receiver saw as a fraction of R, the rows the ticks claimed per
delivered row, and the `deferred` delivery-log rows per delivered row. Prints; never judges.
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import tick_db  # noqa: E402

# A file of its own: bench/tick.py may run meanwhile.
tick_db.SQLITE_PATH = Path(tempfile.gettempdir()) / "tw_bench_rate_slots.sqlite3"


def run_case(*, case: str, args: argparse.Namespace) -> str:
    from django.db import connection
    from django.utils import timezone

    from dbqueue.models import PaceBudget, WorkerTotal
    from delivery.models import Delivery, DeliveryOutcome, WebhookEndpoint
    from delivery.transports.signing import generate_secret
    from tenancy.models import Plan, Tenant
    from tests.support.http_server import Reply, recording_server

    tick_db.empty_queue()
    PaceBudget.objects.all().delete()
    WorkerTotal.objects.all().delete()
    received: list[float] = []
    lock = threading.Lock()

    def answer(request) -> Reply:
        with lock:
            received.append(time.monotonic())
        return Reply(200)

    with recording_server(answer) as server:
        tenant = Tenant.objects.create(name=f"bench {case}")
        endpoint = WebhookEndpoint.objects.create(
            tenant=tenant, url=server.url, secret=generate_secret()
        )
        if case == "rate_limit":
            WebhookEndpoint.objects.filter(pk=endpoint.pk).update(rate_limit=args.rate)
        else:
            plan = Plan.objects.create(name="bench paced", deliveries_per_second=args.rate)
            Tenant.objects.filter(pk=tenant.pk).update(plan=plan)
        tick_db.add_due_rows(
            tenant=tenant, endpoint=endpoint, count=args.rows, due_at=timezone.now()
        )
        connection.close()
        env = {**os.environ, "LOG_LEVEL": "WARNING"}
        processes = [
            subprocess.Popen(
                [sys.executable, "manage.py", "run_tick", "--loop", "--interval", "2"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(args.ticks)
        ]
        try:
            deadline = time.monotonic() + 60
            while not received and time.monotonic() < deadline:
                time.sleep(0.05)
            first = received[0] if received else time.monotonic()
            time.sleep(max(0.0, first + args.seconds - time.monotonic()))
        finally:
            for process in processes:
                process.send_signal(signal.SIGTERM)
            for process in processes:
                process.wait(timeout=120)
    with lock:
        in_window = sum(first <= at < first + args.seconds for at in received)
    delivered = Delivery.objects.filter(outcome=DeliveryOutcome.DELIVERED).count()
    deferred = Delivery.objects.filter(outcome=DeliveryOutcome.DEFERRED).count()
    claimed = sum(
        WorkerTotal.objects.filter(worker="run_tick", name="claimed").values_list(
            "total", flat=True
        )
    )
    fraction = in_window / args.seconds / args.rate
    per = max(delivered, 1)
    return (
        f"[{args.db}] {case} {args.rate}/s, {args.rows} rows, {args.ticks} tick processes, "
        f"{args.seconds:.0f} s: {in_window / args.seconds:.2f} deliveries/s = "
        f"{fraction:.2f} of the rate; {claimed / per:.2f} rows claimed and "
        f"{deferred / per:.2f} deferred log rows per delivered row "
        f"({delivered} delivered, {claimed} claimed, {deferred} deferred)"
    )


def run_one(args: argparse.Namespace) -> None:
    tick_db.prepare_environment(args.db)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    try:
        for case in ("rate_limit", "plan"):
            print(run_case(case=case, args=args), flush=True)
    finally:
        tick_db.drop(args.db)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="sqlite")
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--rate", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--ticks", type=int, default=2)
    args = parser.parse_args()
    if args.db == "both":
        for db in ("sqlite", "postgres"):
            # A fresh interpreter per database: Django is set up once per process.
            argv = [arg for arg in sys.argv[1:] if not arg.startswith("--db")]
            argv = [a for a in argv if a not in ("sqlite", "postgres", "both")]
            subprocess.run([sys.executable, __file__, "--db", db, *argv], check=True)
        return
    run_one(args)


if __name__ == "__main__":
    main()
