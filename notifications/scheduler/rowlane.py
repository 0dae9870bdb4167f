"""The row lane: rows delivered one by one, each by a row worker that calls its channels
(webhooks; email through the Django backend), with at most `concurrency` in flight.

A row is claimed when a worker slot is free for it, or a place in the queue of a webhook
endpoint that answers fast enough to start it well within its lease (`EndpointGate`). Each
endpoint gets at most a few slots, shared by every tick process (`endpoints.Endpoints`), and
its circuit breaker defers its rows while it is down, so a dead receiver costs nobody else
anything. A channel another lane carries (an email in a Resend batch) is handed to that
lane, and the joiner writes the row back once both are known."""

from collections import Counter, deque
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Future
from datetime import datetime
from typing import Any

from django.db import DatabaseError
from django.db.models import Q

from dbqueue.claims import Claimed
from notifications.models import Channel, Notification, WebhookEndpoint
from notifications.scheduler.breaker import Signal
from notifications.scheduler.buffer import WriteBackBuffer
from notifications.scheduler.deliver import (
    Deferral,
    RowDelivery,
    Senders,
    deliver_row,
    pending_channels,
)
from notifications.scheduler.endpoints import Endpoints
from notifications.scheduler.gate import Admission
from notifications.scheduler.joiner import Joiner
from notifications.scheduler.lane import Carrier, Tick, may_start, release, without_poison
from notifications.scheduler.outcomes import DeferralReason


class RowLane:
    def __init__(
        self,
        tick: Tick,
        *,
        senders: Senders,
        joiner: Joiner,
        buffer: WriteBackBuffer,
        claim: Callable[..., Claimed],
        executor: Callable[..., Any],
        carriers: Mapping[str, Carrier],
        leave: Q | None,
    ) -> None:
        """`carriers`: the lanes that carry a channel instead of a row worker; `leave`: the
        rows this lane does not claim (those carriers claim them)."""
        self.tick, self.senders, self.joiner, self.buffer = tick, senders, joiner, buffer
        self.notification_claim, self.carriers, self.leave = claim, carriers, leave
        config = tick.config
        self.endpoints = Endpoints(tick)
        self.gate = self.endpoints.gate
        # future -> (row, the endpoint whose slot it holds or None)
        self.in_flight: dict[Future, tuple[Notification, Any]] = {}
        # Rows waiting for a free worker (a claim may bring more than there are).
        self.queued: deque[Notification] = deque()
        # Rows about to start whose endpoint's slot is still to be taken (at step's end).
        self.wanting: list[Notification] = []
        self.exhausted = False
        # Rows of busy endpoints were left for later (not claimed, or released), so coming
        # up short did not mean nothing is due: claim again once one of their slots frees.
        self.left_for_later = False
        self.rows = executor(config.concurrency, thread_name_prefix="tick-row")
        # Two channels a row at most; a channel that overran its deadline may still hold
        # a thread, so the channel pool is not shared with the row workers.
        self.channels = executor(2 * config.concurrency, "tick-channel")

    @property
    def futures(self) -> Collection[Future]:
        return self.in_flight.keys()

    @property
    def drained(self) -> bool:
        return self.exhausted

    def pause(self) -> float | None:
        # While deliveries run, wake in time to renew the slots they hold.
        return self.endpoints.pause(now=self.tick.clock.now()) if self.in_flight else None

    def close(self) -> None:
        self.endpoints.close()
        self.rows.shutdown(wait=False, cancel_futures=True)
        self.channels.shutdown(wait=False, cancel_futures=True)

    def _free_slots(self) -> int:
        return self.tick.config.concurrency - len(self.in_flight) - len(self.queued)

    def wants_claim(self) -> bool:
        free = self._free_slots()
        return (
            not self.exhausted
            and self.tick.may_claim()
            # Claim in batches (fewer statements), yet only for slots that are free now, or
            # for the queue of a fast endpoint that runs low.
            and (
                (free > 0 and (free * 2 >= self.tick.config.concurrency or not self.in_flight))
                or self._refills() > 0
            )
        )

    def _refills(self) -> int:
        # Rows queued for a worker mean the workers, not the endpoints, are the limit:
        # claiming ahead for the endpoints' queues would only make rows wait longer here.
        return 0 if self.queued else self.gate.refills(now=self.tick.clock.now())

    def claim(self) -> None:
        self.buffer.flush_releases()
        tick, now = self.tick, self.tick.clock.now()
        # No more of one endpoint's rows than it can start or hold waiting; rows that wait
        # for an endpoint with rows left need no free worker.
        limits = self.gate.claim_limits(now=now)
        extra = 0 if self.queued else limits.extra
        wanted = tick.claim_room(min(max(self._free_slots(), 0) + extra, tick.config.batch))
        try:
            claimed = self.notification_claim(
                now=now,
                lease=tick.config.lease,
                limit=wanted,
                skip_endpoints=limits.skip,
                per_endpoint=tick.config.endpoint_share,
                endpoint_caps=limits.caps,
                only=~self.leave if self.leave is not None else None,
            )
        except DatabaseError as exc:
            if tick.lose(exc):
                return
            raise
        per_endpoint = Counter(row.webhook_endpoint_id for row in claimed)
        per_endpoint.pop(None, None)
        # A short claim drained the queue only if no other tick took rows it ranked; one
        # that took an endpoint's full share may have left more of its rows due.
        short = len(claimed) < wanted
        self.exhausted = short and claimed.drained
        capped = self.gate.claimed(per_endpoint, limits, full=not short)
        self.left_for_later = bool(limits.skip or capped)
        tick.summary.claimed += len(claimed)
        endpoints = self.endpoints
        ids = {row.webhook_endpoint_id for row in claimed} - {None}
        if endpoints.load(ids):
            for row in without_poison(claimed, tick=tick, buffer=self.buffer, now=now):
                self.start(row)
        else:
            tick.summary.errors += len(claimed)
        # Short of rows, yet an endpoint that took its full share can take more at once
        # (its rows were deferred, say): claim again rather than wait for its deliveries.
        if any(self.gate.wants_more(endpoint_id, now=now) for endpoint_id in capped):
            self.exhausted = False

    def start(self, row: Notification) -> None:
        """Send the row's pending channels, or defer, hold or release it as its webhook
        endpoint's gate says."""
        now = self.tick.clock.now()
        if not may_start(row, tick=self.tick, buffer=self.buffer, now=now):
            self.left_for_later = True
            return
        endpoint = self.endpoints.of(row)
        deferred: dict[str, Deferral] = {}
        if endpoint is not None:
            admission = self.gate.admit(endpoint.pk, now=now)
            if admission is Admission.WAIT:
                self.gate.wait(endpoint.pk, row)
                return
            if admission is Admission.RELEASE:
                release(row, buffer=self.buffer)
                self.left_for_later = True
                return
            if admission is Admission.DEFER:
                until = self.gate.circuit(endpoint.pk).open_until
                deferred[Channel.WEBHOOK] = Deferral(
                    until=until, reason=DeferralReason.CIRCUIT_OPEN
                )
                endpoint = None
        self._send_row(row, gated=endpoint, deferred=deferred, now=now)

    def _send_row(
        self,
        row: Notification,
        *,
        gated: WebhookEndpoint | None,
        deferred: dict[str, Deferral],
        now: datetime,
        slot_taken: bool = False,
    ) -> None:
        """Hand the row's channels to the lanes that carry them and to a row worker (when
        any is left for one), or queue it until a worker is free; a webhook starts only on
        a slot of its endpoint this tick holds (taken at the step's end, `slot_taken` once
        that was tried)."""
        pending = [c for c in pending_channels(row) if c not in deferred]
        away = [c for c in pending if c in self.carriers]
        if len(away) == len(pending) and (away or deferred):
            self._expect(row, away, here=False, deferred=deferred, now=now)
            return
        if len(self.in_flight) >= self.tick.config.concurrency:
            self.queued.append(row)  # admitted again when a worker is free
            return
        if gated is not None and not self.endpoints.slot_free(gated.pk, now=now):
            if slot_taken:
                self._hold_back(row, gated.pk)
            else:
                self.wanting.append(row)
            return
        self._expect(row, away, here=True, deferred=deferred, now=now)
        if gated is not None:
            self.gate.started(gated.pk)
        future = self.rows.submit(
            deliver_row,
            row,
            endpoint=self.endpoints.get(row.webhook_endpoint_id),
            now=now,
            senders=self.senders,
            pool=self.channels,
            timeout=self.tick.config.channel_timeout,
            deferred=deferred,
            elsewhere=frozenset(away),
        )
        self.in_flight[future] = (row, gated.pk if gated is not None else None)

    def _expect(
        self,
        row: Notification,
        away: list[str],
        *,
        here: bool,
        deferred: dict[str, Deferral],
        now: datetime,
    ) -> None:
        self.joiner.expect(row, pieces=len(away) + here, at=now, deferred=deferred)
        for channel in away:
            self.carriers[channel].take(row)

    def collect(self, done: set[Future]) -> None:
        for future in done & self.in_flight.keys():
            row, endpoint_id = self.in_flight.pop(future)
            try:
                delivery = future.result()
            except Exception as exc:  # one bad row must not stop the tick
                self.joiner.broke(row, exc)
                delivery = None
            signal = None
            if endpoint_id is not None:
                signal = self._endpoint_done(endpoint_id, delivery)
                # Claim again once an endpoint whose rows were left can take more: not on
                # every delivery (each claim ranks every due row), but when its queue runs low.
                now = self.tick.clock.now()
                if self.left_for_later and self.gate.wants_more(endpoint_id, now=now):
                    self.exhausted = False
            if delivery is not None:
                self.endpoints.settled(delivery)
                self.joiner.settle(
                    row, results=delivery.results, deferred=delivery.deferred, signal=signal
                )

    def send(self) -> None:
        while self.queued and len(self.in_flight) < self.tick.config.concurrency:
            self.start(self.queued.popleft())
        self._take_slots()
        self.endpoints.tend(queued=self.queued, now=self.tick.clock.now())

    def _take_slots(self) -> None:
        """Take the slots the rows about to start want (and more of those endpoints whose
        rows wait while more may be had) in one statement, then start those rows, or hold
        them back when their endpoint had no slot for them."""
        now = self.tick.clock.now()
        rows, self.wanting = self.wanting, []
        grown = self.endpoints.take_for(rows, now=now)
        if grown is None:
            self.tick.summary.errors += len(rows)  # the connection is lost
            return
        for row in rows:
            endpoint = self.endpoints.get(row.webhook_endpoint_id)
            self._send_row(row, gated=endpoint, deferred={}, now=now, slot_taken=True)
        for endpoint_id in grown:
            self._start_waiting(endpoint_id, now=now)

    def _hold_back(self, row: Notification, endpoint_id: Any) -> None:
        """A row whose endpoint had no slot for it waits for one of those running here,
        or goes back unattempted."""
        if not self.endpoints.wait_for_slot(row, endpoint_id):
            release(row, buffer=self.buffer)
            self.left_for_later = True

    def _start_waiting(self, endpoint_id: Any, *, now: datetime) -> None:
        while (row := self.gate.next_waiting(endpoint_id, now=now)) is not None:
            self.start(row)

    def _endpoint_done(
        self, endpoint_id: Any, delivery: RowDelivery | None
    ) -> tuple[Any, Signal] | None:
        """Free the endpoint's slot, apply the attempt to its circuit, start who waited;
        the attempt's news for the circuit, if any, for the row's write-back."""
        now = self.tick.clock.now()
        signal = self.endpoints.finished(endpoint_id, delivery, now=now)
        self._start_waiting(endpoint_id, now=now)
        return (endpoint_id, signal) if signal is not None else None
