"""`manage.py prune [--days N] [--json]`: retention for the queue tables (cron-able)."""

import json
from dataclasses import asdict
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from jobs.leasing import database_now
from jobs.services import retention_prune


class Command(BaseCommand):
    help = (
        "Delete completed jobs and delivery-log rows older than --days days "
        "(default RETENTION_DAYS) and expired idempotency keys; print the counts."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, default=None, help="age limit in days")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        days = settings.RETENTION_DAYS if options["days"] is None else options["days"]
        if days < 0:
            raise CommandError("--days must be zero or a positive number of days.")
        counts = asdict(retention_prune(now=database_now(), days=days))
        if options["json"]:
            self.stdout.write(json.dumps(counts))
            return
        listed = " ".join(f"{name}={count}" for name, count in counts.items())
        self.stdout.write(f"prune: {listed} (older than {days} days)")
