"""The tick's sending process: a burst's webhooks sent from a process of their own.

One Python process runs one thread at a time. A tick's webhook is signing, an HTTP exchange
and parsing the answer (about two thirds of the tick's CPU), and the rest is the tick's own
work: claims, gates, plans and write-backs. In one process the two take turns on one core,
however many the machine has. Once a tick is busy with a burst (at least half its
workers' worth of deliveries in flight while it sent WAVES_BEFORE_A_PROCESS waves of
webhooks itself), it starts a child process, `python -m
delivery.scheduler.sending_child`, and once that is up (its imports take a moment, in
which the tick goes on sending itself; it imports nothing of Django to keep that short)
hands it, while it stays that busy, every webhook that is a row's one channel here. The
child sends them on `concurrency` threads of its own while the tick goes on claiming,
planning and writing back. With fewer deliveries in flight (a few slow endpoints, or one
with few slots) the tick sends itself: its own core is not the limit then, and the
hand-over's extra hops would only lengthen each delivery.

What does not change: the child runs `send_webhook` itself, with the same address pinning
and SSRF vetting, the same deadline, no redirects, and connections kept alive per endpoint
host and vetted address for the tick's life alone (the child lives as long as the tick's
row lane). The tick builds each message (payload, secrets, webhook-id) as before; only the
exchange moves.

Failure: the child owns no row and no database connection. If it dies, every webhook it had
not answered comes back as a failed attempt of category `internal` that says nothing about
the endpoint (no circuit signal): the row backs off and is retried, and a receiver may see
that webhook twice, with the same webhook-id. The tick then sends in its own threads again.
A webhook the child has not answered within the channel timeout and a grace is failed the
same way, so a stuck child cannot hold a row past its lease. The child ignores SIGINT and
SIGTERM (the tick finishes its rows in flight when stopped) and exits when its socket closes:
when the tick closes it, or when the tick's process dies, even by SIGKILL.
"""

import contextlib
import functools
import itertools
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

from delivery.scheduler import sending_child
from delivery.transports.base import DeliveryResult, WebhookMessage
from outbound.categories import ErrorCategory

logger = logging.getLogger("delivery.scheduler")

# The directory that holds the `notifications` package: the child's import root.
_ROOT = Path(__file__).resolve().parents[2]
# A tick starts its sending process once it has sent this many waves of webhooks (its
# concurrency each) itself: a tick of fewer never pays for a process it would hardly use.
# One: the child takes a few tenths of a second to start, in which the tick sends at its
# one-core rate, so a burst is better served by a child asked for at once.
WAVES_BEFORE_A_PROCESS = 1
# How long past its deadline a webhook may stay unanswered before it is failed.
GRACE_SECONDS = 5.0
# How often the tick looks for overdue webhooks while none comes back.
_OVERDUE_CHECK_SECONDS = 1.0
# How long a closed child may take to exit before it is killed.
_EXIT_SECONDS = 5.0


@dataclass
class _Pending:
    future: Future
    then: Callable[[DeliveryResult], Any]
    overdue_at: float


class SendingProcess:
    """A child process that sends webhooks for the tick. `submit` queues one and `flush`
    sends what was queued (the tick does both from its main thread, once a step); each
    future completes, on a reader thread, with `then(result)`."""

    def __init__(self, *, concurrency: int, allow_private: bool) -> None:
        self.allow_private = allow_private
        ours, theirs = socket.socketpair()
        # Our own interpreter and module, and two numbers: no input of anyone else's.
        self.process = subprocess.Popen(  # noqa: S603
            [sys.executable, "-m", sending_child.__name__, str(theirs.fileno()), str(concurrency)],
            pass_fds=[theirs.fileno()],
            cwd=_ROOT,
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        self._socket = ours
        self._connection = Connection(os.dup(ours.fileno()))
        self._ids = itertools.count()
        self._pending: dict[int, _Pending] = {}
        self._lock = threading.Lock()
        self._outbox: list[tuple[int, WebhookMessage, float, bool]] = []
        self.alive = True
        self.handed_over = 0  # webhooks handed to the child
        # Until the child says it is up (its imports take a moment), the tick sends itself.
        self.ready = False
        self._reader = threading.Thread(target=self._read, name="tick-sending", daemon=True)
        self._reader.start()

    def submit(
        self, message: WebhookMessage, *, timeout: float, then: Callable[[DeliveryResult], Any]
    ) -> Future | None:
        """Queue a webhook; None until the child is up or once it is gone (the caller sends
        it itself)."""
        if not self.accepting:
            return None
        future: Future = Future()
        request_id = next(self._ids)
        overdue_at = time.monotonic() + timeout + GRACE_SECONDS
        with self._lock:
            self._pending[request_id] = _Pending(future, then, overdue_at)
        self._outbox.append((request_id, message, timeout, self.allow_private))
        self.handed_over += 1
        return future

    @property
    def accepting(self) -> bool:
        """The child is up and not gone: it takes webhooks."""
        return self.ready and self.alive

    def flush(self) -> None:
        """Hand the child what was queued, in one write."""
        if not self._outbox:
            return
        batch, self._outbox = self._outbox, []
        try:
            self._connection.send(batch)
        except OSError:
            self._ended()

    def close(self) -> None:
        """End the child (it finishes nothing more) and fail what it had not answered."""
        if self.process.poll() is None:
            with contextlib.suppress(OSError):  # the child already closed its end
                self._socket.shutdown(socket.SHUT_RDWR)
        try:
            self.process.wait(timeout=_EXIT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join()
        self._connection.close()
        self._socket.close()
        logger.debug("sending process %s sent %d webhooks", self.process.pid, self.handed_over)

    def _read(self) -> None:
        while True:
            try:
                if not self._connection.poll(_OVERDUE_CHECK_SECONDS):
                    self._fail_overdue()
                    continue
                answers = self._connection.recv()
            except (EOFError, OSError):
                self._ended()
                return
            self.ready = True  # its first word is an empty batch: it is up
            for request_id, result in answers:
                self._complete(request_id, result)

    def _complete(self, request_id: int, result: DeliveryResult) -> None:
        with self._lock:
            pending = self._pending.pop(request_id, None)
        if pending is None:  # failed as overdue meanwhile
            return
        try:
            pending.future.set_result(pending.then(result))
        except Exception as exc:  # handed to the tick, as a worker's exception is
            pending.future.set_exception(exc)

    def _fail_overdue(self) -> None:
        now = time.monotonic()
        with self._lock:
            overdue = [i for i, pending in self._pending.items() if pending.overdue_at <= now]
        for request_id in overdue:
            self._complete(request_id, _failed("no answer from the sending process in time"))

    def _ended(self) -> None:
        self.alive = False
        with self._lock:
            unanswered = list(self._pending)
        for request_id in unanswered:
            self._complete(request_id, _failed("the sending process ended"))


def sending_for_this_tick(*, concurrency: int) -> "OnASpareCore | None":
    """What starts the tick's sending process, where it has one: with TICK_SENDING_PROCESS
    on, on PostgreSQL outside a transaction (where its claims run on a thread of their own
    too: the deployment it is for). SQLite, a tick inside a transaction (a test's) and
    injected senders send in the tick's own threads."""
    if not settings.TICK_SENDING_PROCESS:
        return None
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return None
    allow_private = settings.WEBHOOK_ALLOW_PRIVATE_TARGETS
    start = functools.partial(SendingProcess, concurrency=concurrency, allow_private=allow_private)
    return OnASpareCore(start)


class OnASpareCore:
    """Starts the sending process only if the machine has had a core to spare since it was
    last asked (at most every CHECK_SECONDS, the first time that long after the tick began;
    Linux's /proc/stat; elsewhere it assumes so). A hand-over costs CPU of its own (about a
    tenth of a millisecond a webhook) that only a core the tick does not use repays: where
    as many tick processes run as there are cores, the machine is busy and the ticks go on
    sending themselves."""

    CHECK_SECONDS = 0.05

    def __init__(self, start: Callable[[], SendingProcess]) -> None:
        self.start = start
        self.since = _cpu_times()
        self.asked_at = time.monotonic()

    def __call__(self) -> SendingProcess | None:
        if time.monotonic() - self.asked_at < self.CHECK_SECONDS:
            return None
        now = _cpu_times()
        spare = _idle_cores(self.since, now)
        self.since, self.asked_at = now, time.monotonic()
        return self.start() if spare is None or spare >= SPARE_CORE else None


# The idle share of the machine's cores that counts as a core to spare.
SPARE_CORE = 0.5


def _cpu_times() -> tuple[int, int] | None:
    """The machine's (idle, total) CPU time so far, in clock ticks; None off Linux."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(value) for value in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle and waiting for I/O
    return idle, sum(fields[:8])


def _idle_cores(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """How many of the machine's cores were idle between two readings (None: unknown)."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    idle_share = (after[0] - before[0]) / (after[1] - before[1])
    return idle_share * (os.cpu_count() or 1)


def _failed(error: str) -> DeliveryResult:
    # Not the endpoint's doing: `internal` gives no circuit signal; transient, so retried.
    return DeliveryResult(ok=False, error=error, permanent=False, category=ErrorCategory.INTERNAL)
