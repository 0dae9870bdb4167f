"""`manage.py queue_status [--json]`: the figures an operator graphs for both queues."""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from dbqueue.clock import database_now
from delivery.stats import endpoint_circuit_stats, notification_queue_stats
from jobs.stats import job_queue_stats


class Command(BaseCommand):
    help = "Show the notification and job queues (due, in flight, backing off, dead letters)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--json", action="store_true", help='one object {"notifications": {}, "jobs": {}}'
        )

    def handle(self, *args: Any, **options: Any) -> None:
        now = database_now()
        figures = {
            "notifications": {
                **notification_queue_stats(now=now),
                **endpoint_circuit_stats(now=now),
            },
            "jobs": job_queue_stats(now=now),
        }
        if options["json"]:
            self.stdout.write(json.dumps(figures))
            return
        width = max(len(name) for group in figures.values() for name in group)
        for queue, group in figures.items():
            self.stdout.write(queue)
            for name, value in group.items():
                self.stdout.write(f"  {name:<{width}}  {value:>8}")
