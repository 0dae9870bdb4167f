"""`manage.py consume_jobs [--once | --loop [--interval S]]`: drain the jobs outbox.

--once (the default, for cron) drains one bounded pass (at most --limit jobs, for at most
--max-seconds) and exits; --loop runs such passes --interval seconds apart, woken early on
PostgreSQL when a job is committed. SIGTERM/SIGINT finish the job in flight. --queue NAME
runs only the jobs of that queue (a Django task's `queue_name`; every other job's is
"default").
A lost database ends --once with one error line and exit status 1 (the job in flight is
reclaimed when its lease expires); --loop reports it and tries again."""

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from dbqueue.commands import add_mode_arguments, positive
from jobs.consumer import jobs_worker


class Command(BaseCommand):
    help = "Claim and run ready jobs: one batch (--once, the default) or until stopped (--loop)."

    def add_arguments(self, parser: CommandParser) -> None:
        add_mode_arguments(parser, default_interval=1.0)
        parser.add_argument(
            "--limit",
            type=int,
            default=100,
            help="at most N jobs per pass: the whole run with --once, each pass of --loop (100)",
        )
        parser.add_argument(
            "--max-seconds", type=float, default=50.0, help="stop claiming after this (50)"
        )
        parser.add_argument(
            "--queue",
            dest="queue_name",
            default=None,
            help="run only this queue's jobs (a task's queue_name; default: every queue)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        positive(options, "limit", "max_seconds", "interval")
        worker = jobs_worker(
            limit=options["limit"],
            max_seconds=options["max_seconds"],
            interval=options["interval"],
            report=self.stdout.write,
            report_error=self.stderr.write,
            queue_name=options["queue_name"],
        )
        worker.run(loop=options["loop"])
