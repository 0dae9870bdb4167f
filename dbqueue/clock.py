"""One clock for due checks and leases, shared by both queues."""

import time
from datetime import UTC, datetime, timedelta

from django.db import connection
from django.utils import timezone


class Clock:
    """One clock for due checks and leases.

    On PostgreSQL it is the database's, so workers on machines with skewed clocks agree: the
    offset to the server's `clock_timestamp()` is read once and applied to the local
    monotonic clock, so a lease taken late in a long run starts when that row's work starts.
    On SQLite (one machine) it is the local clock. A fixed `now` (tests) never moves.
    """

    def __init__(self, now: datetime | None = None) -> None:
        self._fixed = now is not None
        self._origin = now if now is not None else database_now()
        self._started = time.monotonic()

    def now(self) -> datetime:
        if self._fixed:
            return self._origin
        return self._origin + timedelta(seconds=time.monotonic() - self._started)

    def elapsed(self) -> float:
        return time.monotonic() - self._started

    @property
    def moves(self) -> bool:
        """False for a fixed `now`: nothing waits on it for a later time to come."""
        return not self._fixed


def database_now() -> datetime:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT clock_timestamp()")
            return cursor.fetchone()[0]
    return timezone.now()


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def micros(moment: datetime) -> int:
    """Microseconds since the Unix epoch: how the shared budgets and slots store a time, so
    that one statement compares and moves it on either database."""
    return (moment - _EPOCH) // timedelta(microseconds=1)


def instant(micros: int) -> datetime:
    """The aware UTC datetime `micros` (since the Unix epoch) stands for."""
    return _EPOCH + timedelta(microseconds=micros)
