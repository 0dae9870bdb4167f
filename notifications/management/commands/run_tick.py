"""`manage.py run_tick [--limit N] [--loop [--interval S]]`: deliver due notifications.

Cron mode (default) runs one tick and exits 0; --loop ticks every --interval seconds.
SIGTERM/SIGINT stop claiming, let in-flight rows finish and be written back, then exit 0.
"""

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import close_old_connections

from notifications.scheduler.tick import run_tick


class Command(BaseCommand):
    help = "Deliver due notifications (one tick; --loop to keep ticking)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--limit", type=int, help="at most N rows this tick (TICK_LIMIT)")
        parser.add_argument("--loop", action="store_true", help="tick repeatedly until stopped")
        parser.add_argument(
            "--interval", type=float, default=60.0, help="seconds between tick starts (--loop)"
        )

    def handle(self, *args: Any, limit: int | None, loop: bool, interval: float, **options: Any):
        if limit is not None and limit <= 0:
            raise CommandError("--limit must be a positive whole number")
        if interval <= 0:
            raise CommandError("--interval must be a positive number of seconds")
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        while True:
            summary = run_tick(limit=limit, stop=stop)
            self.stdout.write(summary.line())
            if not loop:
                return
            # Between ticks, like between requests: drop a broken or expired connection.
            close_old_connections()
            # Ticks start `interval` apart; a long tick still leaves a one-second pause.
            if stop.wait(max(1.0, interval - summary.duration)):
                return
