"""Waking a looping worker on PostgreSQL's LISTEN/NOTIFY instead of waiting out its poll.

The LISTEN needs a session of its own for as long as the worker runs, which a transaction
pooler (PgBouncer in transaction mode) cannot give: it is opened only on the direct
connection DATABASE_LISTEN_URL names (the `listen` database alias), never on DATABASE_URL.
Without it the worker polls."""

import logging
import threading
import time

import psycopg
from django.conf import settings
from django.db import DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

logger = logging.getLogger(__name__)

# The alias config/settings.py gives DATABASE_LISTEN_URL.
LISTEN_DB_ALIAS = "listen"
# How often a waiting worker looks at its stop flag.
_STOP_CHECK_SECONDS = 0.5


class ListenWaiter:
    """LISTEN on `channel` over a dedicated connection; a lost connection degrades to
    polling until it can be opened again."""

    def __init__(self, channel: str) -> None:
        self.channel = channel
        self._db: BaseDatabaseWrapper | None = None

    @classmethod
    def configured(cls, channel: str) -> "ListenWaiter | None":
        """A waiter on DATABASE_LISTEN_URL's connection, or None (poll) when it is unset."""
        return cls(channel) if settings.DATABASE_LISTEN_URL else None

    def wait(self, timeout: float, stop: threading.Event) -> bool:
        deadline = time.monotonic() + timeout
        while not stop.is_set() and (remaining := deadline - time.monotonic()) > 0:
            slice_seconds = min(remaining, _STOP_CHECK_SECONDS)
            try:
                raw = self.connect()
                if list(raw.notifies(timeout=slice_seconds, stop_after=1)):
                    list(raw.notifies(timeout=0))  # one pass serves the whole burst
                    return True
            except (DatabaseError, psycopg.Error):
                logger.warning("LISTEN %s: connection lost; polling meanwhile", self.channel)
                self.close()
                stop.wait(slice_seconds)
        return False

    def woken(self) -> bool:
        """Whether a notification came since the last look, without waiting: a pass in
        progress takes up work committed while it runs. A lost connection answers no (the
        next wait opens it again)."""
        if self._db is None:
            return False
        try:
            return bool(list(self._db.connection.notifies(timeout=0)))
        except (DatabaseError, psycopg.Error):
            self.close()
            return False

    @property
    def listening(self) -> bool:
        """Whether the LISTEN connection is open: a looping worker opened it; a single
        pass (cron's) never does."""
        return self._db is not None

    def open(self) -> None:
        self.connect()

    def connect(self) -> "psycopg.Connection":
        """The listening connection, opened (and LISTENing) if it is not already."""
        if self._db is None:
            db = connections.create_connection(LISTEN_DB_ALIAS)
            db.ensure_connection()
            db.connection.execute(f"LISTEN {self.channel}")
            self._db = db
        return self._db.connection

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
