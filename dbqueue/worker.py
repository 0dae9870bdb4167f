"""The loop both worker commands share: once (cron) or until stopped, one behaviour for
signals, intervals and a database that goes away.

A worker is a `run(stop)` function that does one bounded pass (a tick, a batch) and returns
its summary. `--once` runs it once: a lost or unreachable database ends the command with its
summary and one error line (exit 1), never a traceback. `--loop` runs it until SIGTERM or
SIGINT: passes start `interval` seconds apart (a waiter may wake it earlier, and a pass
that left work behind is followed at once), idle passes are not reported, and a database
error is reported in one line and tried again at the next interval on a new connection.
"""

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from django.core.management.base import CommandError
from django.db import DatabaseError, InterfaceError, OperationalError, close_old_connections

from dbqueue.database import database_error_line
from dbqueue.signals import stop_on_signals

logger = logging.getLogger(__name__)


class Summary(Protocol):
    claimed: int
    duration: float

    def line(self) -> str: ...


class ConnectionLost(Exception):
    """A pass lost its database connection part-way: it claimed nothing more and wrote
    nothing more back (what it held waits for its leases). `summary` is what it did; the
    database error is the cause."""

    def __init__(self, summary: Summary) -> None:
        super().__init__("lost the database connection")
        self.summary = summary


class Waiter(Protocol):
    """How a looping worker waits between passes; True when woken before `timeout`."""

    def open(self) -> None: ...
    def wait(self, timeout: float, stop: threading.Event) -> bool: ...
    def close(self) -> None: ...


class PollWaiter:
    def open(self) -> None:
        pass

    def wait(self, timeout: float, stop: threading.Event) -> bool:
        stop.wait(timeout)
        return False

    def close(self) -> None:
        pass


class Worker:
    """Runs `run` once or in a loop (see the module docstring). `report` and `report_error`
    take one line each (the command's stdout and stderr). `notified_wakeups` and
    `timed_wakeups` count how each wait between passes ended; `idle` is set while waiting."""

    def __init__(
        self,
        name: str,
        run: Callable[[threading.Event], Summary],
        *,
        interval: float,
        report: Callable[[str], None],
        report_error: Callable[[str], None],
        waiter: Waiter | None = None,
        again: Callable[[Summary], bool] = lambda summary: False,
    ) -> None:
        self.name, self.one_pass, self.interval = name, run, interval
        self.report, self.report_error = report, report_error
        self.waiter = waiter or PollWaiter()
        # Whether a pass left work it could not finish (its budget ran out): the next one
        # starts at once instead of after the interval.
        self.again = again
        self.notified_wakeups = 0
        self.timed_wakeups = 0
        self.idle = threading.Event()
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def run(self, *, loop: bool) -> None:
        """`run_loop()` with --loop, else `run_once()`: the commands' one call."""
        if loop:
            self.run_loop()
        else:
            self.run_once()

    def run_once(self) -> Summary:
        """One pass; a database that is lost or unreachable raises CommandError with one
        line, after the pass's summary was reported."""
        with stop_on_signals(self.stop):
            try:
                summary = self.one_pass(self._stop)
            except ConnectionLost as exc:
                self.report(exc.summary.line())
                raise CommandError(database_error_line(self.name, exc.__cause__ or exc)) from exc
            except (OperationalError, InterfaceError) as exc:
                raise CommandError(database_error_line(self.name, exc)) from exc
        self.report(summary.line())
        return summary

    def run_loop(self) -> None:
        """Passes until stopped; the pass in flight always finishes and is written back."""
        with stop_on_signals(self.stop):
            # Open the waiter first, so no work committed during the first pass goes
            # unnoticed until the next interval.
            self.waiter.open()
            try:
                while not self._stop.is_set():
                    summary = self._pass()
                    if summary is not None and self.again(summary):
                        continue
                    self._wait(0.0 if summary is None else summary.duration)
            finally:
                self.waiter.close()

    def _pass(self) -> Summary | None:
        try:
            summary = self.one_pass(self._stop)
        except ConnectionLost as exc:
            summary = exc.summary
            self.report(summary.line())
            self.report_error(database_error_line(self.name, exc.__cause__ or exc))
            return summary
        except DatabaseError as exc:
            self.report_error(database_error_line(self.name, exc))
            return None
        finally:
            # Between passes, like between requests: drop a broken or expired connection.
            close_old_connections()
        if summary.claimed:
            self.report(summary.line())
        return summary

    def _wait(self, busy_seconds: float) -> None:
        # Passes start `interval` apart; one that outlasted it still leaves a short pause.
        pause = max(min(1.0, self.interval), self.interval - busy_seconds)
        self.idle.set()
        woken = self.waiter.wait(pause, self._stop)
        self.idle.clear()
        if woken:
            self.notified_wakeups += 1
        elif not self._stop.is_set():
            self.timed_wakeups += 1
