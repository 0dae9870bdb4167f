"""run_tick: claim due notifications a batch at a time, deliver them through the tick's
lanes, write their outcomes back in short fenced batches, and report a summary.

A tick drains: it claims until nothing is due, its time budget is spent or its optional cap
is reached. The main thread decides everything; the row lane's claims and every write-back
run on the tick's database thread (database_thread.py: its own connection on PostgreSQL,
inline elsewhere), the rest of the database work on the main thread, and worker threads
only call the channels (a busy tick's webhooks go out from its sending process,
sending_process.py, when the machine has a core to spare). The tick itself is a thin
driver: each lane (lanes.py) owns one kind of work — rows delivered one by one
(rowlane.py), emails sent in paced Resend batches (batchlane.py) — and says when it wants
to claim, what it has in flight and what to do when that comes back; the joiner writes a
row back once every lane that carried a channel of it is done, through the write-back
buffer (both in writeback.py). The tick owns the loop, the budget, the cap, the stop, and
the rule for a lost database connection; what it offers its lanes, what it is told and
what it reports are in context.py.
"""

import contextlib
import dataclasses
import gc
import itertools
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError
from django.db.models import Q

from dbqueue.claims import Claimed, ClaimSpec, ClaimValue, claim
from dbqueue.clock import Clock
from dbqueue.database import connection_lost
from dbqueue.listen import ListenWaiter
from dbqueue.worker import ConnectionLost, Worker
from delivery.models import Notification
from delivery.scheduler.context import TickConfig, TickSummary, due_rows_left
from delivery.scheduler.database_thread import database_for_this_tick
from delivery.scheduler.deliver import Senders, default_senders
from delivery.scheduler.lanes import build_lanes
from delivery.scheduler.sending_process import SendingProcess, sending_for_this_tick
from delivery.scheduler.writeback import WriteBackBuffer, write_back
from outbound.connections import Connections

# The channel delivery's migration 0005 notifies when a row becomes due now.
NOTIFY_CHANNEL = "tickwork_tick"

# Origins (endpoint host and vetted address) a tick keeps connections to; beyond, the
# least recently used one is closed.
_ORIGINS = 256

DUE = ClaimSpec(
    ready=lambda now: Notification.objects.due(now=now),
    order_by=("next_fire_at",),
    fair_by="tenant",
    # Reset by every write-back, so it counts claims that died before producing an outcome.
    on_claim={"unfinished_claims": ClaimValue.INCREMENT},
    capped_by="webhook_endpoint",
    # notification_tenant_due_idx: a claim takes each tenant's first due rows from it.
    groups=lambda: Notification.objects.on_schedule(),
)


def notification_claim(
    *,
    now: datetime,
    lease: timedelta,
    limit: int,
    skip_endpoints: Iterable[Any] = (),
    per_endpoint: int | None = None,
    endpoint_caps: Mapping[Any, int] | None = None,
    only: Q | None = None,
) -> Claimed:
    """Claim up to `limit` due rows (round-robin across tenants, oldest first within one);
    each carries its new claim_token. Rows of `skip_endpoints` (busy in this tick) are left
    for a later claim, at most `per_endpoint` rows of one webhook endpoint are taken
    (`endpoint_caps[e]` of endpoint `e`), and with `only` just the rows it matches."""
    spec = DUE
    if only is not None:
        # The compiled statement is kept per predicate, so each `only` is its own shape.
        spec = dataclasses.replace(spec, ready=lambda at: DUE.ready(at).filter(only))
    return claim(
        spec,
        now=now,
        lease=lease,
        limit=limit,
        skip=set(skip_endpoints),
        cap=per_endpoint,
        caps=endpoint_caps,
    )


def run_tick(
    *,
    now: datetime | None = None,
    max_rows: int | None = None,
    time_budget: float | None = None,
    concurrency: int | None = None,
    senders: Senders | None = None,
    stop: threading.Event | None = None,
    clock: Clock | None = None,
    woken: Callable[[], bool] | None = None,
    linger: Callable[[float, threading.Event], bool] | None = None,
) -> TickSummary:
    """Run one tick. `now` fixes the clock (tests); None uses the one shared clock, or
    `clock` when given (tests that move it themselves).
    Claims in batches until nothing is due, `time_budget` seconds passed, `max_rows` rows
    were claimed (default TICK_MAX_ROWS, None = no cap) or `stop` is set; then finishes and
    writes back the rows in flight. Raises ConnectionLost when the database connection is
    lost: it then claims nothing more, lets the rows in flight finish and writes none of
    them back (counted as errors: they stay claimed until their leases expire).
    `woken` says whether rows became due since it was last asked (a looping tick's LISTEN):
    the tick then claims again, even after its claims found nothing more due. `linger(seconds,
    stop)` waits up to `seconds` for rows to become due (the same LISTEN): a tick that
    delivered something and has nothing left waits in it for the rest of its time budget
    rather than end, so the next message is not delayed by a new tick's start."""
    config = TickConfig.from_settings(
        max_rows=max_rows, time_budget=time_budget, concurrency=concurrency
    )
    clock = clock or Clock(now)
    with _long_lived_objects_frozen():
        summary = _one_tick(config, clock, stop or threading.Event(), senders, woken, linger)
    summary.add_to_totals(now=clock.now())
    return summary


def _one_tick(
    config: TickConfig,
    clock: Clock,
    stop: threading.Event,
    senders: Senders | None,
    woken: Callable[[], bool] | None,
    linger: Callable[[float, threading.Event], bool] | None,
) -> TickSummary:
    """The tick itself. Nothing it makes outlives this call but its summary: its lanes,
    threads and database connection are garbage (cycles among them) by the time
    _long_lived_objects_frozen collects."""
    tick = _Tick(config, clock, stop, woken, linger)
    # Injected senders are called in the tick's threads: no sending process for them.
    sending = sending_for_this_tick(concurrency=config.concurrency) if senders is None else None
    # Connections are kept alive per endpoint and vetted address for this tick only.
    with Connections(per_origin=config.concurrency, origins=_ORIGINS) as connections:
        return tick.run(senders or default_senders(connections), sending=sending)


# Every this many ticks of a process, the first included, the tick starts with a full
# garbage collection (see _long_lived_objects_frozen).
FULL_COLLECTION_EVERY = 10
_ticks_begun = itertools.count()


@contextlib.contextmanager
def _long_lived_objects_frozen() -> Iterator[None]:
    """Leave the objects that exist before the tick (Django, its settings, the code) out of
    the garbage collector's passes until it ends. A tick allocates fast, and every full pass
    would rescan that whole heap with every thread of the tick stopped: tens of milliseconds
    in which no delivery is collected and none is started. Reference counting still frees
    what the tick drops.

    A frozen cycle is out of every pass, garbage or not, and in a loop of ticks the next
    freeze comes before any full pass could reach what the last thaw let go: each tick
    would freeze again, for good, the cycles dropped before it. So the cycles the tick made
    and dropped (its lanes, threads, database connection) are collected before the thaw,
    while the tick's own objects are all a pass sees (a short pass); and every
    FULL_COLLECTION_EVERY ticks a full pass before the freeze collects the cycles dropped
    between ticks (a connection closed at CONN_MAX_AGE, what a tick that raised held)."""
    if next(_ticks_begun) % FULL_COLLECTION_EVERY == 0:
        gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.collect()
        gc.unfreeze()


class _Tick:
    """The driver: loops over the lanes until none has work left (context.Tick is what it
    offers them)."""

    def __init__(
        self,
        config: TickConfig,
        clock: Clock,
        stop: threading.Event,
        woken: Callable[[], bool] | None = None,
        linger: Callable[[float, threading.Event], bool] | None = None,
    ) -> None:
        self.config, self.clock, self.stop, self.woken = config, clock, stop, woken
        self.linger = linger
        self.summary = TickSummary()
        self.lost: DatabaseError | None = None
        # Claims and write-backs run here: on a thread of their own on PostgreSQL.
        self.database = database_for_this_tick()
        self.buffer = WriteBackBuffer(self, write=write_back, database=self.database)

    def run(
        self, senders: Senders, *, sending: Callable[[], SendingProcess | None] | None = None
    ) -> TickSummary:
        self.lanes = build_lanes(
            self,
            senders=senders,
            buffer=self.buffer,
            claim=notification_claim,
            executor=ThreadPoolExecutor,
            database=self.database,
            sending=sending,
        )
        try:
            while self._step():
                pass
            self.buffer.flush()
            self.buffer.written()
            self._count_left_behind()
        finally:
            for lane in self.lanes:
                lane.close()
            self.database.close()
        self.summary.duration = self.clock.elapsed()
        if self.lost is not None:
            raise ConnectionLost(self.summary) from self.lost
        return self.summary

    def _step(self) -> bool:
        """Claim for every lane that wants rows, else wait for work in flight (or for a
        lane's pause); False once nothing is left to do."""
        if self.woken is not None and self.may_claim() and self.woken():
            for lane in self.lanes:
                lane.rows_became_due()
        claimed = False
        for lane in self.lanes:
            if lane.wants_claim():
                lane.claim()
                claimed = True
        if claimed:
            self._send()
            # New rows started first; finished ones are written back while they run.
            self._write_back(after_claim=True)
        elif futures := [
            *(future for lane in self.lanes for future in lane.futures),
            *self.buffer.futures,
        ]:
            done, _ = wait(futures, timeout=self._pause(), return_when=FIRST_COMPLETED)
            self.buffer.collect(done)
            for lane in self.lanes:
                lane.collect(done)
            self._send()
            self._write_back(after_claim=False)
        elif (pause := self._lanes_pause()) is not None:
            self.stop.wait(pause)
            # What waited for its time (a pacing slot) starts now.
            self._send()
        elif self._woken_while_lingering():
            for lane in self.lanes:
                lane.rows_became_due()
        else:
            return False
        return True

    def _woken_while_lingering(self) -> bool:
        """Whether rows became due while the tick, with nothing left to do, waited for them
        (`linger`) for the rest of its time budget. Only a tick that delivered something
        lingers, after writing its rows back: starting a tick (its database thread and
        connection, the receivers' kept-alive connections, every tenth a collection of the
        heap) cost 20 to 100 ms that a message published to an idle loop waited for."""
        if self.linger is None or not self.summary.claimed or not self.may_claim():
            return False
        self.buffer.flush()
        self.buffer.written()
        return self.linger(self.config.time_budget - self.clock.elapsed(), self.stop)

    def _write_back(self, *, after_claim: bool) -> None:
        """Write back once a claim's worth of rows waits or the oldest has waited
        FLUSH_SECONDS, and after a claim unless a write-back is still running: the rows
        that finish meanwhile wait for the next one rather than go in a write-back of a few
        rows each (inline, nothing is ever still running)."""
        if self.buffer.wait() == 0 or (after_claim and not self.buffer.writing):
            self.buffer.flush()

    def _send(self) -> None:
        for lane in self.lanes:
            lane.send()

    def _pause(self) -> float | None:
        """How long the tick may wait for work in flight before it has to act."""
        pauses = [p for p in (self.buffer.wait(), self._lanes_pause()) if p is not None]
        return min(pauses, default=None)

    def _lanes_pause(self) -> float | None:
        pauses = [p for lane in self.lanes if (p := lane.pause()) is not None]
        return min(pauses, default=None)

    def may_claim(self) -> bool:
        capped = self.config.max_rows is not None and self.summary.claimed >= self.config.max_rows
        return (
            not capped
            and self.lost is None
            and not self.stop.is_set()
            and self.clock.elapsed() < self.config.time_budget
        )

    def claim_room(self, wanted: int) -> int:
        if self.config.max_rows is None:
            return wanted
        return min(wanted, self.config.max_rows - self.summary.claimed)

    def lose(self, exc: DatabaseError) -> bool:
        """Whether `exc` cost the tick its connection; from then on it claims and writes
        nothing (reconnecting could claim rows it might never write back)."""
        if self.lost is None and connection_lost(exc):
            self.lost = exc
        return self.lost is not None

    def _count_left_behind(self) -> None:
        """When the tick stopped on its budget, its cap or a stop request rather than on an
        empty queue, record how many due rows it left (one COUNT); `--loop` then ticks again
        at once, and /metrics shows whether the scheduler keeps up."""
        if all(lane.drained for lane in self.lanes) or self.lost is not None:
            return
        try:
            self.summary.due_left = due_rows_left(now=self.clock.now())
        except DatabaseError as exc:
            if not self.lose(exc):
                raise


def tick_worker(
    *,
    max_rows: int | None,
    interval: float,
    report: Callable[[str], None],
    report_error: Callable[[str], None],
) -> Worker:
    """The run_tick worker: each pass is one tick. With DATABASE_LISTEN_URL set, a looping
    tick waits for a row to become due now instead of waiting out its interval."""

    waiter = ListenWaiter.configured(NOTIFY_CHANNEL)
    woken = waiter.woken if waiter is not None else None

    def linger(seconds: float, stop: threading.Event) -> bool:
        # Only a looping tick lingers (its worker listens); cron's single tick ends when done.
        return waiter is not None and waiter.listening and waiter.wait(seconds, stop)

    def tick(stop: threading.Event) -> TickSummary:
        return run_tick(max_rows=max_rows, stop=stop, woken=woken, linger=linger)

    return Worker(
        "run_tick",
        tick,
        interval=interval,
        report=report,
        report_error=report_error,
        waiter=waiter,
        again=lambda summary: isinstance(summary, TickSummary) and summary.due_left > 0,
    )
