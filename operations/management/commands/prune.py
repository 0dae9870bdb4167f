"""`manage.py prune`: retention for the queue tables (cron-able, safe to run at any time)."""

import json
import time
from dataclasses import asdict
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from dbqueue.clock import database_now
from dbtools.logfmt import logfmt_line
from operations.retention import RetentionPolicy, retention_preview, retention_prune


class Command(BaseCommand):
    help = (
        "Delete completed jobs, completed notifications and delivery-log rows past their "
        "retention (JOB_RETENTION_DAYS; DELIVERY_RETENTION_DAYS for completed notifications "
        "and the delivery log) and expired idempotency keys, in "
        "batches of PRUNE_BATCH_SIZE rows; print the counts. A retention of 0 days deletes "
        "every finished row and needs --yes."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--days", type=int, default=None, help="one age limit in days for jobs and deliveries"
        )
        parser.add_argument("--jobs-days", type=int, default=None, help="completed jobs' age")
        parser.add_argument("--deliveries-days", type=int, default=None, help="delivery log age")
        parser.add_argument("--batch-size", type=int, default=None, help="rows per transaction")
        parser.add_argument(
            "--dry-run", action="store_true", help="print what would go, per table; delete nothing"
        )
        parser.add_argument("--yes", action="store_true", help="allow a retention of 0 days")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        policy = _policy(options)
        dry_run = options["dry_run"]
        if not (dry_run or options["yes"]):
            _refuse_keeping_nothing(policy, options)
        started = time.monotonic()
        run = retention_preview if dry_run else retention_prune
        counts = asdict(run(now=database_now(), policy=policy))
        if options["json"]:
            self.stdout.write(json.dumps({"dry_run": True, **counts} if dry_run else counts))
            return
        figures = {
            **counts,
            "jobs_days": policy.jobs_days,
            "deliveries_days": policy.deliveries_days,
            "duration_s": time.monotonic() - started,
        }
        self.stdout.write(logfmt_line("prune_dry_run" if dry_run else "prune", figures))


def _policy(options: dict[str, Any]) -> RetentionPolicy:
    days = options["days"]
    policy = RetentionPolicy(
        jobs_days=_first(options["jobs_days"], days, settings.JOB_RETENTION_DAYS),
        deliveries_days=_first(options["deliveries_days"], days, settings.DELIVERY_RETENTION_DAYS),
        batch_size=_first(options["batch_size"], settings.PRUNE_BATCH_SIZE),
    )
    if min(policy.jobs_days, policy.deliveries_days) < 0:
        raise CommandError("--days, --jobs-days and --deliveries-days must be zero or more.")
    if policy.batch_size < 1:
        raise CommandError("--batch-size must be a positive number of rows.")
    return policy


def _refuse_keeping_nothing(policy: RetentionPolicy, options: dict[str, Any]) -> None:
    what = {
        "jobs": f"every completed job ({_source(options, 'jobs_days', 'JOB_RETENTION_DAYS')})",
        "deliveries": "the whole delivery log and every completed notification "
        f"({_source(options, 'deliveries_days', 'DELIVERY_RETENTION_DAYS')})",
    }
    if tables := policy.keeps_nothing():
        raise CommandError(
            f"a retention of 0 days deletes {' and '.join(what[table] for table in tables)}: "
            "see the counts with --dry-run, then run again with --yes to delete them."
        )


def _source(options: dict[str, Any], flag: str, setting: str) -> str:
    """Where a table's retention came from, as an operator would write it."""
    for name in (flag, "days"):
        if options[name] is not None:
            return f"--{name.replace('_', '-')} {options[name]}"
    return f"{setting}={getattr(settings, setting)}"


def _first(*values: int | None) -> int:
    return next(value for value in values if value is not None)
