"""Where the tick's claims and write-backs run: in order on a thread of their own, with a
database connection of their own, so the tick goes on starting and collecting deliveries
while PostgreSQL ranks the due rows or writes outcomes back; or inline, in the tick's own
thread and transaction.

A claim ranks every due row (fairness needs them all): over a 10,000-row burst about 13 ms
each, a fifth of the tick's time; a write-back is a short transaction of a few statements.
Run inline, those are milliseconds in which no finished delivery is collected and no waiting
row starts, so an endpoint with a few slots sat idle through each of them. On a connection
of its own a claim is what a second tick process's claim already is (its rows are fenced
like any other), and a write-back is fenced on its claim token wherever it runs. One thread
runs both, one at a time in the order they were asked for: rows given back are written
before the next claim looks for due rows, as they were inline.

Inline is kept where a second connection would not see what the tick's own connection
sees or would fight it for the database: SQLite (one writer at a time) and a tick run
inside a transaction (a test's).
"""

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

from django.db import connection, connections


class TickDatabase(Protocol):
    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future: ...

    def close(self) -> None: ...


class InlineDatabase:
    """Runs the work at once in the calling thread: its future is done when submit returns."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to whoever reads the future, as a pool does
            future.set_exception(exc)
        return future

    def close(self) -> None:
        pass


class DatabaseThread:
    """Runs the work one piece at a time, in order, on a thread with its own database
    connection, closed with it."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="tick-database")

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        return self.pool.submit(fn, *args, **kwargs)

    def close(self) -> None:
        # Django's connections are per thread: this thread's is closed by itself.
        self.pool.submit(connections.close_all).result()
        self.pool.shutdown(wait=True)


def database_for_this_tick() -> TickDatabase:
    """A thread of its own on PostgreSQL outside a transaction, else inline."""
    if connection.vendor == "postgresql" and not connection.in_atomic_block:
        return DatabaseThread()
    return InlineDatabase()
