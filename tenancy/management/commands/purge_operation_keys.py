"""manage.py purge_operation_keys [--json] — cron-able."""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from tenancy.api.idempotency import operation_keys_purge


class Command(BaseCommand):
    help = "Delete expired Idempotency-Key records (IDEMPOTENCY_KEY_TTL_SECONDS)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help='Print {"purged": N}.')

    def handle(self, *args: Any, **options: Any) -> None:
        purged = operation_keys_purge(now=timezone.now())
        if options["json"]:
            self.stdout.write(json.dumps({"purged": purged}))
        else:
            self.stdout.write(f"Purged {purged} expired operation keys.")
