"""The tick's CPU per email sent in Resend batches.

    .venv/bin/python bench/email_cpu.py [--db sqlite|postgres] [--emails N] [--rounds R]

Each round makes N due email rows and drains them with one run_tick through the fake Resend
of tests/support, which runs in a process of its own (so its CPU is not the tick's) with a
rate limit high enough never to pace. Prints each round's emails/s and the tick process's
CPU per email sent (time.process_time: every thread of the tick). Prints; never judges.
"""

import argparse
import multiprocessing
import sys
import time
from datetime import timedelta
from multiprocessing.connection import Connection
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import tick_db  # noqa: E402

UNPACED = 1000.0  # requests per second: the limit is never what is measured


def serve_resend(conn: Connection) -> None:
    """Run the fake Resend until told to stop; send its URL and API key first."""
    from tests.support.fake_resend import fake_resend

    with fake_resend(rate=UNPACED) as resend:
        conn.send((resend.url, resend.api_key))
        conn.recv()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="postgres")
    parser.add_argument("--emails", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    tick_db.prepare_environment(args.db)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections
    from django.utils import timezone

    from bench.load_tick import _email_rows
    from delivery.scheduler.tick import run_tick
    from tenancy.models import Tenant

    call_command("migrate", verbosity=0)
    fork = multiprocessing.get_context("fork")
    ours, theirs = fork.Pipe()
    connections.close_all()  # the child must not share the parent's connection
    server = fork.Process(target=serve_resend, args=(theirs,))
    server.start()
    try:
        url, api_key = ours.recv()
        settings.RESEND_API_KEY, settings.RESEND_API_URL = api_key, url
        settings.RESEND_RATE_LIMIT = UNPACED
        tenant = Tenant.objects.create(name="bench")
        for round_number in range(args.rounds):
            due = timezone.now() - timedelta(seconds=1)
            _email_rows(tenant=tenant, count=args.emails, due_at=due, prefix=f"r{round_number}-")
            cpu = time.process_time()
            summary = run_tick()
            cpu = time.process_time() - cpu
            assert summary.delivered == args.emails, summary.line()
            print(
                f"[{args.db}] round {round_number + 1}: {summary.delivered} emails in Resend "
                f"batches in {summary.duration:.2f} s ({summary.delivered / summary.duration:.0f}"
                f"/s); tick CPU per email {cpu / summary.delivered * 1e6:.0f} µs",
                flush=True,
            )
    finally:
        ours.send("stop")
        server.join(10)
        tick_db.drop(args.db)


if __name__ == "__main__":
    main()
