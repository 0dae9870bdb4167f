"""An exchange's deadline: a watchdog that shuts down the sockets of one outbound HTTP
exchange once its time is up. The exchange sets `active_deadline`; every connection of the
watched pools registers its socket with it on connecting, and a kept-alive connection when
an exchange takes it from its pool."""

import contextlib
import contextvars
import heapq
import itertools
import os
import socket
import threading
import time
from typing import TYPE_CHECKING

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from .quickack import QuickAckConnection

if TYPE_CHECKING:
    from urllib3._base_connection import BaseHTTPConnection


class Deadline:
    """Shuts down the sockets of one exchange once `seconds` have passed. requests' read
    timeout restarts with every byte received, so a server dripping bytes would otherwise
    hold a worker (and its lease) far beyond the channel timeout."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self.reused = False  # the exchange went out on a kept-alive connection
        self._cancelled = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        _WATCHDOG.add(time.monotonic() + seconds, self)

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            expired = self.expired
        if expired:
            _shut_down(sock)

    def cancel(self) -> None:
        """The exchange is over: its sockets (back in their pool, perhaps) are left alone."""
        with self._lock:
            self._cancelled = True
            self._sockets.clear()

    def _expire(self) -> None:
        with self._lock:
            if self._cancelled:
                return
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut_down(sock)


class _Watchdog:
    """One thread per process that expires every deadline at its time (a thread per
    exchange cost more CPU than the rest of a delivery's bookkeeping)."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, Deadline]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, at: float, deadline: Deadline) -> None:
        with self._wake:
            heapq.heappush(self._due, (at, next(self._order), deadline))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="outbound-deadlines", daemon=True
                )
                self._thread.start()
            if self._due[0][2] is deadline:
                self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._due or self._due[0][0] > time.monotonic():
                    self._wake.wait(self._due[0][0] - time.monotonic() if self._due else None)
                deadline = heapq.heappop(self._due)[2]
            deadline._expire()

    def after_fork(self) -> None:
        # A forked child has the parent's heap but not its thread.
        self._wake = threading.Condition()
        self._due, self._thread = [], None


_WATCHDOG = _Watchdog()
os.register_at_fork(after_in_child=_WATCHDOG.after_fork)


def _shut_down(sock: socket.socket) -> None:
    # The plain-socket shutdown also works on an SSLSocket without racing its TLS state:
    # the blocked reader sees end-of-stream and fails.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


active_deadline: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "tickwork_http_deadline", default=None
)


def _watch_connection(connection: HTTPConnection) -> None:
    deadline = active_deadline.get()
    if deadline is not None and connection.sock is not None:
        deadline.watch(connection.sock)


class _WatchedHTTPConnection(QuickAckConnection):
    def connect(self) -> None:
        super().connect()
        _watch_connection(self)


class _WatchedHTTPSConnection(QuickAckConnection, HTTPSConnection):
    def connect(self) -> None:
        super().connect()
        _watch_connection(self)


def _taken(connection: "BaseHTTPConnection") -> "BaseHTTPConnection":
    """A connection just taken from a pool: a kept-alive one is watched by the exchange
    taking it (a new one registers itself on connecting)."""
    deadline = active_deadline.get()
    # The pools hold urllib3's own connections, which have the socket the protocol leaves out.
    sock = getattr(connection, "sock", None)
    if deadline is not None and sock is not None:
        deadline.reused = True
        deadline.watch(sock)
    return connection


class WatchedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection

    def _get_conn(self, timeout: float | None = None) -> "BaseHTTPConnection":
        return _taken(super()._get_conn(timeout))


class WatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection

    def _get_conn(self, timeout: float | None = None) -> "BaseHTTPConnection":
        return _taken(super()._get_conn(timeout))
