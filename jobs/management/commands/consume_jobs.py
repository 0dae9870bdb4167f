"""`manage.py consume_jobs --once | --loop`: drain the jobs outbox (see jobs.consumer).

A database error ends --once with one error line and exit status 1 (the job in flight is
reclaimed when its lease expires); --loop logs it and polls again."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import InterfaceError, OperationalError

from dbqueue.clock import Clock
from dbqueue.database import database_error_line
from dbqueue.signals import stop_on_signals
from jobs.consumer import Worker, jobs_drain


class Command(BaseCommand):
    help = (
        "Claim and run ready jobs. --once (cron): drain one bounded batch and exit. "
        "--loop (worker): repeat, waiting --interval seconds between batches (on PostgreSQL "
        "a committed job wakes it at once). SIGTERM/SIGINT finish the job in flight, exit 0."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="drain one batch, then exit")
        parser.add_argument("--loop", action="store_true", help="run as a worker until stopped")
        parser.add_argument("--limit", type=int, default=100, help="jobs per batch (100)")
        parser.add_argument(
            "--max-seconds", type=float, default=50.0, help="stop claiming after this (50)"
        )
        parser.add_argument(
            "--interval", type=float, default=1.0, help="--loop: seconds between polls (1)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        once, loop = options["once"], options["loop"]
        limit, max_seconds, interval = options["limit"], options["max_seconds"], options["interval"]
        _validate(once=once, loop=loop, limit=limit, max_seconds=max_seconds, interval=interval)
        worker = Worker(
            limit=limit, max_seconds=max_seconds, interval=interval, report=self.stdout.write
        )
        with stop_on_signals(worker.stop):
            if loop:
                worker.run()
                return
            try:
                summary = jobs_drain(
                    clock=Clock(), limit=limit, max_seconds=max_seconds, should_stop=worker.stopping
                )
            except (OperationalError, InterfaceError) as exc:
                raise CommandError(database_error_line("consume_jobs", exc)) from exc
        self.stdout.write(summary.line())


def _validate(*, once: bool, loop: bool, limit: int, max_seconds: float, interval: float) -> None:
    if once == loop:
        raise CommandError("Choose exactly one mode: --once (cron) or --loop (worker).")
    if limit < 1:
        raise CommandError("--limit must be at least 1.")
    if max_seconds <= 0:
        raise CommandError("--max-seconds must be a positive number of seconds.")
    if interval <= 0:
        raise CommandError("--interval must be a positive number of seconds.")
