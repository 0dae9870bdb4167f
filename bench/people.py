"""Sending to people, measured: what recipients cost the tick, and digests at scale.

    .venv/bin/python bench/people.py [--db sqlite|postgres] [--recipients N]
        [--events N] [--digest-recipients N] [--clients N]

On a fresh database (bench/tick_db.py's: a SQLite file, or the PostgreSQL database
BENCH_TICK_DB names) it prints:
  1. tick CPU (process time, every thread) per delivered email for --recipients emails
     named by recipients — each with preferences and a send window, open now — against the
     same number of plain emails to `email_to` addresses, and the ratio (the issue's bound:
     within 1.10). The email sender is a no-op in the process: the figure is the tick's own.
  2. digest joins per second through the API (POST /v1/notifications in-process, one
     Idempotency-Key each, from --clients processes at once, as an API server's workers):
     --events events over --digest-recipients recipients;
  3. the tick after the windows close: one email per recipient, its time and CPU.
Defaults are small (1,000 recipients; 5,000 events over 100 recipients); the issue's sizes
are --recipients 10000 --events 100000 --digest-recipients 1000. Prints; never judges.

With --instructions, part 1 counts the tick's instructions (bench/instructions.py: valgrind's
callgrind, one round of each kind, fifty times slower) instead of timing its CPU, and parts
2 and 3 are left out: CPU time on a small shared machine varies by ±10% from round to
round, the count by a few percent.
"""

import argparse
import multiprocessing
import os
import statistics
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import tick_db  # noqa: E402

WINDOW = {"days": ["MO", "TU", "WE", "TH", "FR", "SA", "SU"], "from": "00:00", "until": "23:59"}
# The window is closed one minute a day: the recipients live where it is day now, so no
# round meets that minute (at every UTC hour, one of these zones is between 06:00 and 18:00).
DAYTIME_ZONES = ("Europe/Berlin", "America/New_York", "Asia/Tokyo")
PREFERENCES = {
    "channels": {"email": True, "webhook": False},
    "categories": {"marketing": {"email": False}, "reminders": {"email": True}},
}


def no_op_senders():
    from delivery.scheduler.deliver import Senders
    from delivery.transports.base import DeliveryResult

    def sent(message, *, timeout):
        return DeliveryResult(ok=True)

    return Senders(email=sent, webhook=sent)


def drained(now, rows: int) -> int:
    """Rows delivered by one tick draining `rows` due rows."""
    from delivery.scheduler.tick import run_tick

    return run_tick(now=now, max_rows=rows, time_budget=3600, senders=no_op_senders()).delivered


def timed_tick(now, rows: int) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, delivered) of one tick draining `rows` due rows."""
    cpu, wall = time.process_time(), time.monotonic()
    delivered = drained(now, rows)
    return time.process_time() - cpu, time.monotonic() - wall, delivered


class CpuTime:
    """Part 1's measure: the tick process's CPU time, every thread (five rounds)."""

    rounds = 5
    unit = "µs of CPU"
    scale = 1e6

    def __call__(self, label: str, now, rows: int) -> tuple[float, int]:
        cpu, _, delivered = timed_tick(now, rows)
        return cpu, delivered


class Instructions:
    """Part 1's measure under --instructions: the tick's instructions (one round)."""

    rounds = 1
    unit = "instructions"
    scale = 1

    def __init__(self) -> None:
        from bench.instructions import Counter

        self.counter = Counter()

    def __call__(self, label: str, now, rows: int) -> tuple[float, int]:
        delivered, count = self.counter.count(label, lambda: drained(now, rows))
        return count, delivered


def people_vs_plain(tenant, count: int, measure: CpuTime | Instructions) -> None:
    from django.utils import timezone

    from delivery.models import Notification
    from people.models import Recipient

    now = timezone.now().replace(microsecond=0)
    zone = next(z for z in DAYTIME_ZONES if 6 <= now.astimezone(ZoneInfo(z)).hour < 18)
    Recipient.objects.bulk_create(
        [
            Recipient(
                tenant=tenant,
                key=f"person-{i}",
                email=f"person{i}@example.com",
                timezone=zone,
                send_window=WINDOW,
                preferences=PREFERENCES,
            )
            for i in range(count)
        ],
        batch_size=1000,
    )

    def burst(named: bool, round_number: int) -> tuple[float, int]:
        Notification.objects.bulk_create(
            [
                Notification(
                    tenant=tenant,
                    channels=["email"],
                    email_to=[] if named else [f"person{i}@example.com"],
                    recipients=[f"person-{i}"] if named else [],
                    category="reminders" if named else "",
                    subject="Bench",
                    body="Bench body",
                    next_fire_at=now,
                    due_at=now,
                    recurrence_anchor=now,
                )
                for i in range(count)
            ],
            batch_size=1000,
        )
        _analyze()  # as autovacuum would have by then
        try:
            return measure(f"{'people' if named else 'plain'}-{round_number}", now, count)
        finally:
            tick_db.empty_queue()

    # The machine is shared and noisy: alternate, five rounds, and take the median of each
    # kind and of each round's ratio. Every burst starts from empty queue tables, or the
    # later ones would pay for the rows of the earlier.
    rounds = [(burst(False, n), burst(True, n)) for n in range(measure.rounds)]
    assert all(plain[1] == people[1] == count for plain, people in rounds), rounds
    plain_cost = statistics.median(plain[0] for plain, _ in rounds) / count * measure.scale
    people_cost = statistics.median(people[0] for _, people in rounds) / count * measure.scale
    ratios = [people[0] / plain[0] for plain, people in rounds]
    print(
        f"1. tick {measure.unit} per delivered email (medians of {measure.rounds} rounds): "
        f"plain {plain_cost:,.0f}, to recipients with preferences and windows "
        f"{people_cost:,.0f} ({count} emails); ratio {statistics.median(ratios):.3f} "
        f"(rounds: {', '.join(f'{ratio:.3f}' for ratio in ratios)})"
    )


def _analyze() -> None:
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE notifications_notification, notifications_recipient")


def _join_events(token: str, numbers: range, recipients: int) -> None:
    """POST one digest event per number in `numbers` through the API (one client)."""
    from django.db import connections
    from django.test import Client

    client = Client(headers={"Authorization": f"Bearer {token}"})
    for n in numbers:
        response = client.post(
            "/v1/notifications",
            {
                "channels": ["email"],
                "recipients": [f"reader-{n % recipients}"],
                "subject": f"Event {n}",
                "body": "Something happened",
                "digest": {"key": "activity", "window_seconds": 60},
            },
            content_type="application/json",
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )
        assert response.status_code == 201, response.content
    connections.close_all()


def digests(tenant, token: str, *, events: int, recipients: int, clients: int) -> None:
    from django.db import connections
    from django.utils import timezone

    from people.models import Digest, Recipient

    Recipient.objects.bulk_create(
        [
            Recipient(tenant=tenant, key=f"reader-{i}", email=f"reader{i}@example.com")
            for i in range(recipients)
        ],
        batch_size=1000,
    )
    # Each client is a process of its own, as an API server's workers are: forked with no
    # connection open, each opens its own.
    connections.close_all()
    fork = multiprocessing.get_context("fork")
    workers = [
        fork.Process(target=_join_events, args=(token, range(c, events, clients), recipients))
        for c in range(clients)
    ]
    started = time.monotonic()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.monotonic() - started
    assert all(worker.exitcode == 0 for worker in workers), [w.exitcode for w in workers]
    assert Digest.objects.count() == recipients
    print(
        f"2. digest joins through the API: {events / elapsed:.0f}/s ({events} events over "
        f"{recipients} recipients, {clients} client processes, {elapsed:.1f} s)"
    )
    closed = timezone.now() + timedelta(seconds=61)
    cpu, wall, delivered = timed_tick(closed, recipients)
    assert delivered == recipients
    print(
        f"3. the tick after the window: {delivered} digest emails in {wall:.2f} s "
        f"({cpu / delivered * 1e6:.0f} µs CPU each)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--recipients", type=int, default=1000)
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--digest-recipients", type=int, default=100)
    parser.add_argument("--clients", type=int, default=2, help="API client processes")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="part 1 only, counting instructions under callgrind (needs valgrind)",
    )
    args = parser.parse_args()
    if args.instructions:
        from bench.instructions import rerun_under_callgrind

        rerun_under_callgrind()
    tick_db.prepare_environment(args.db)
    # The per-user rate limit is not what is measured.
    os.environ["THROTTLE_RATE_USER"] = "100000000/min"
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from tenancy.models import ApiToken, Membership, Tenant

    call_command("migrate", verbosity=0)
    try:
        tenant = Tenant.objects.create(name="bench")
        user = get_user_model().objects.create(username="bench", email="bench@example.com")
        Membership.objects.create(user=user, tenant=tenant, role="owner")
        token = ApiToken.issue(user=user, name="bench")[1]
        print(f"[{args.db}]")
        measure = Instructions() if args.instructions else CpuTime()
        people_vs_plain(tenant, args.recipients, measure)
        if args.instructions:
            return
        digests(
            tenant,
            token,
            events=args.events,
            recipients=args.digest_recipients,
            clients=args.clients,
        )
    finally:
        tick_db.drop(args.db)


if __name__ == "__main__":
    main()
