"""`manage.py run_tick [--limit N] [--loop [--interval S]]`: deliver due notifications.

Cron mode (default) runs one tick and exits 0; --loop ticks every --interval seconds.
SIGTERM/SIGINT stop claiming, let in-flight rows finish and be written back, then exit 0.
A lost database connection ends the tick early: cron mode prints its summary and one
error line and exits 1; --loop reports it and ticks again at the next interval.
"""

import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import InterfaceError, OperationalError, close_old_connections

from dbqueue.database import database_error_line
from dbqueue.signals import stop_on_signals
from notifications.scheduler.tick import DatabaseLost, TickSummary, run_tick


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
        with stop_on_signals(stop.set):
            self._run(limit=limit, loop=loop, interval=interval, stop=stop)

    def _run(
        self, *, limit: int | None, loop: bool, interval: float, stop: threading.Event
    ) -> None:
        while True:
            try:
                summary = run_tick(limit=limit, stop=stop)
            except (DatabaseLost, OperationalError, InterfaceError) as exc:
                summary = self._database_failed(exc, loop=loop)
            else:
                self.stdout.write(summary.line())
            if not loop:
                return
            # Between ticks, like between requests: drop a broken or expired connection.
            close_old_connections()
            # Ticks start `interval` apart; a long tick still leaves a one-second pause.
            if stop.wait(max(1.0, interval - summary.duration)):
                return

    def _database_failed(self, exc: Exception, *, loop: bool) -> TickSummary:
        """Report a tick that the database failed: its summary (if it got that far) and
        one line naming the error. Cron mode fails with it (no traceback); --loop goes on,
        and the next tick starts on a new connection."""
        if isinstance(exc, DatabaseLost):
            self.stdout.write(exc.summary.line())
        line = database_error_line("run_tick", exc.__cause__ or exc)
        if not loop:
            raise CommandError(line) from exc
        self.stderr.write(line)
        return exc.summary if isinstance(exc, DatabaseLost) else TickSummary()
