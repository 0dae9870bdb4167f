"""Threads that race each other on real database connections, for the concurrency tests.

Django gives each thread its own connections, so each worker is a session of its own; the
thread closes them when its worker ends, so none outlives the test (PostgreSQL refuses to
drop a test database that still has a session). Waits are bounded and fail loudly: nothing
here guesses how long the database takes.
"""

import threading
import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from django.db import connection, connections

T = TypeVar("T")

WAIT_SECONDS = 60.0


class Threads(Generic[T]):
    """Each worker in its own thread. The threads meet at one barrier before their workers
    run, so the workers start together rather than in the order the threads were made.
    Between start() and join() the test may hold what the workers are to wait on (a row
    lock, an uncommitted key) until `wait_for_lock_waiters` sees them waiting."""

    def __init__(self, workers: Sequence[Callable[[], T]]) -> None:
        self._workers = list(workers)
        self._barrier = threading.Barrier(len(self._workers))
        self._results: dict[int, T] = {}
        self._errors: dict[int, BaseException] = {}
        self._threads = [
            threading.Thread(target=self._run, args=(index,), daemon=True)
            for index in range(len(self._workers))
        ]

    def _run(self, index: int) -> None:
        try:
            self._barrier.wait(timeout=WAIT_SECONDS)
            self._results[index] = self._workers[index]()
        except BaseException as exc:  # re-raised in the test's thread by join()
            self._errors[index] = exc
        finally:
            connections.close_all()

    def start(self) -> "Threads[T]":
        for thread in self._threads:
            thread.start()
        return self

    def join(self, timeout: float = WAIT_SECONDS) -> list[T]:
        """Each worker's return value, in the order the workers were given, once all have
        ended. Raises the exception a worker raised (a group when several did), or
        TimeoutError when a worker is still running `timeout` seconds from now."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        running = sum(thread.is_alive() for thread in self._threads)
        if running:
            raise TimeoutError(
                f"{running} of {len(self._threads)} workers still ran after {timeout}s"
            )
        errors = [self._errors[index] for index in sorted(self._errors)]
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise BaseExceptionGroup(f"{len(errors)} workers failed", errors)
        return [self._results[index] for index in range(len(self._workers))]


def run_together(workers: Sequence[Callable[[], T]], *, timeout: float = WAIT_SECONDS) -> list[T]:
    """Run the workers at once, each in its own thread on its own connections; their return
    values in order. Raises as `Threads.join` does."""
    return Threads(workers).start().join(timeout)


def wait_for_lock_waiters(count: int, *, timeout: float = WAIT_SECONDS) -> None:
    """Return once `count` other sessions of this test database wait on a lock (a row or a
    unique key that an open transaction holds). AssertionError after `timeout` seconds.
    PostgreSQL only."""
    deadline = time.monotonic() + timeout
    while _sessions_waiting_on_locks() < count:
        assert time.monotonic() < deadline, f"fewer than {count} sessions waited on a lock"
        time.sleep(0.01)


def _sessions_waiting_on_locks() -> int:
    with connection.cursor() as cursor:
        # Inside a transaction the activity view is a snapshot unless cleared.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        row = cursor.fetchone()
    assert row is not None  # a count always has its row
    return row[0]
