"""`manage.py run_tick [--once | --loop [--interval S]] [--limit N]`: deliver due
notifications.

--once (the default, for cron) runs one tick and exits 0; --loop ticks every --interval
seconds. SIGTERM/SIGINT stop claiming, let in-flight rows finish and be written back, then
exit 0. A lost database ends the tick early: --once prints its summary and one error line
and exits 1; --loop reports it and ticks again at the next interval.
"""

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from dbqueue.commands import add_mode_arguments, positive
from delivery.scheduler.tick import tick_worker


class Command(BaseCommand):
    help = "Deliver due notifications: one tick (--once, the default) or until stopped (--loop)."

    def add_arguments(self, parser: CommandParser) -> None:
        add_mode_arguments(parser, default_interval=60.0)
        parser.add_argument(
            "--limit",
            type=int,
            help="at most N rows per tick, each tick of --loop too (default TICK_MAX_ROWS; "
            "unset: drain what is due)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        positive(options, "limit", "interval")
        worker = tick_worker(
            max_rows=options["limit"],
            interval=options["interval"],
            report=self.stdout.write,
            report_error=self.stderr.write,
        )
        worker.run(loop=options["loop"])
