"""The row lane: rows delivered one by one, each by a row worker that calls its channels
(webhooks; email through the Django backend), with at most `concurrency` in flight.

A row is claimed when a worker slot is free for it, or a place in the queue of a webhook
endpoint that answers fast enough to start it well within its lease (`EndpointGate`). Each
endpoint gets at most a few slots, shared by every tick process (`gate.EndpointSlots`), and
its circuit breaker defers its rows while it is down, so a dead receiver costs nobody else
anything. A channel another lane carries (an email in a Resend batch) is handed to that
lane, and the joiner writes the row back once both are known.

Its claims (`RowClaims`): when it claims, how many rows, and when its queue counts as
drained. A claim is made for the workers that are free now (in batches: at least half of
them, or any once nothing runs), for the queues of fast endpoints that run low
(`EndpointGate.refills`), or ahead of the workers: once the rows waiting for one fall to
half of what the tick delivers in AHEAD_SECONDS, so that a claim deep in a backlog runs
while the workers still have rows rather than after they ran out. A short claim drained
the queue only if it took every row it ranked; an endpoint that took its full share, or
whose rows were left for later (skipped, or given back), brings the next claim once it can
take more.
"""

from collections import Counter, deque
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from django.db import DatabaseError
from django.db.models import Q

from dbqueue.claims import Claimed
from delivery import hooks
from delivery.models import Channel, Notification, WebhookEndpoint
from delivery.scheduler.context import Tick
from delivery.scheduler.database_thread import InlineDatabase, TickDatabase
from delivery.scheduler.deliver import (
    Deferral,
    DeferralReason,
    RowDelivery,
    RowWorkers,
    Senders,
    channels_to_send,
    pending_channels,
)
from delivery.scheduler.gate import Admission, ClaimLimits, EndpointGate, Endpoints, EndpointSlots
from delivery.scheduler.mail import TenantPace
from delivery.scheduler.paced import PacedRows
from delivery.scheduler.sending_process import SendingProcess
from delivery.scheduler.writeback import (
    Joiner,
    WriteBackBuffer,
    may_start,
    quiet_hours,
    release,
    without_crashed,
)

# How long the rows claimed ahead for the workers may keep them busy (RowClaims._ahead).
AHEAD_SECONDS = 0.25


class Carrier(Protocol):
    """A lane that carries one channel of rows the row lane claimed."""

    def take(self, row: Notification) -> None: ...


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
        pace: TenantPace | None = None,
        database: TickDatabase | None = None,
        sending: Callable[[], SendingProcess | None] | None = None,
    ) -> None:
        """`carriers`: the lanes that carry a channel instead of a row worker; `leave`: the
        rows this lane does not claim (those carriers claim them); `database`: where its
        claims run (database_thread.py; inline by default); `sending`: starts the process
        a burst's webhooks go out from (sending_process.py; None: none)."""
        self.tick, self.joiner, self.buffer = tick, joiner, buffer
        self.carriers = carriers
        self.slots = EndpointSlots(tick)
        self.gate = self.slots.gate
        self.endpoints = Endpoints(self.gate)
        config = tick.config
        self.paced = PacedRows(
            window=config.wait_window, pace=pace or TenantPace(), endpoints=self.endpoints.rows
        )
        self.claims = RowClaims(tick, gate=self.gate, paced=self.paced, claim=claim, leave=leave)
        self.workers = RowWorkers(
            concurrency=config.concurrency,
            senders=senders,
            timeout=config.channel_timeout,
            executor=executor,
            sending=sending,
        )
        # Rows waiting for a free worker (a claim may bring more than there are).
        self.queued: deque[Notification] = deque()
        # Rows about to start whose endpoint's slot is still to be taken (at step's end).
        self.wanting: list[Notification] = []
        self.database = database or InlineDatabase()
        # The claim running on the database thread, while it runs (one at a time).
        self.claiming: Future | None = None

    @property
    def futures(self) -> Collection[Future]:
        running = self.workers.in_flight.keys()
        return running if self.claiming is None else [*running, self.claiming]

    @property
    def drained(self) -> bool:
        return self.claims.exhausted

    def pause(self) -> float | None:
        """Wake when a held row's pacing slot comes, and while deliveries run, in time to
        renew the endpoint slots they hold."""
        now = self.tick.clock.now()
        pauses = [self.paced.pause(now=now), self.slots.pause(now=now) if self.futures else None]
        return min((pause for pause in pauses if pause is not None), default=None)

    def close(self) -> None:
        self.slots.close()
        self.workers.close()

    def _free_slots(self) -> int:
        return self.tick.config.concurrency - len(self.workers.in_flight) - len(self.queued)

    def rows_became_due(self) -> None:
        self.claims.exhausted = False

    def wants_claim(self) -> bool:
        return self.claiming is None and self.claims.wanted(
            free=self._free_slots(), running=len(self.workers.in_flight), queued=len(self.queued)
        )

    def claim(self) -> None:
        """Claim on the database thread; the rows start when it is back (at once inline)."""
        self.buffer.flush_releases()
        request = self.claims.request(
            free=self._free_slots(), queued=len(self.queued), known=frozenset(self.endpoints.rows)
        )
        self.claiming = self.database.submit(fetch_claim, self.claims, request)
        if self.claiming.done():
            self._claimed(self.claiming)

    def _claimed(self, claiming: Future) -> None:
        """Start the rows the claim brought, with their endpoints and recipients."""
        self.claiming = None
        tick = self.tick
        try:
            fetched: FetchedClaim = claiming.result()
        except DatabaseError as exc:
            if tick.lose(exc):
                return
            raise
        self.claims.note(fetched.claimed, fetched.request)
        if fetched.failed is not None:
            if not tick.lose(fetched.failed):
                raise fetched.failed
            tick.summary.errors += len(fetched.claimed)
        else:
            self.endpoints.know(fetched.endpoints)
            now = tick.clock.now()
            for row in without_crashed(fetched.claimed, tick=tick, buffer=self.buffer, now=now):
                self.start(row)
        self.claims.started()

    def start(self, row: Notification) -> None:
        """Send the row's pending channels, or defer, hold or release it as its webhook
        endpoint's gate and its pacing slots say."""
        now = self.tick.clock.now()
        if not may_start(row, tick=self.tick, buffer=self.buffer, now=now):
            self.claims.gave_back()
            return
        endpoint = self.endpoints.of(row)
        deferred: dict[str, Deferral] = {}
        if endpoint is not None:
            admission = self.gate.admit(endpoint.pk, now=now)
            if admission is Admission.WAIT:
                self.gate.wait(endpoint.pk, row)
                return
            if admission is Admission.RELEASE:
                self._give_back(row)
                return
            if admission is Admission.DEFER:
                until = self.gate.circuit(endpoint.pk).open_until
                assert until is not None  # the circuit is open
                deferred[Channel.WEBHOOK] = Deferral(
                    until=until, reason=DeferralReason.CIRCUIT_OPEN
                )
                endpoint = None
        if not self._waits_for_a_slot(row, endpoint, deferred, now=now):
            self._send_row(row, gated=endpoint, deferred=deferred, now=now)

    def _waits_for_a_slot(
        self,
        row: Notification,
        endpoint: WebhookEndpoint | None,
        deferred: dict[str, Deferral],
        *,
        now: datetime,
    ) -> bool:
        """Whether the row waits for a pacing slot (paced.py): held here until the slot it
        reserved comes, given back when none comes within its lease, or (on a clock that
        never moves) deferred, unattempted, with what it does not pace sent now."""
        if not self.paced.paces(row, endpoint):
            return False
        tick = self.tick
        latest = None
        if tick.clock.moves and row.claimed_until is not None:
            reach = row.claimed_until - tick.config.start_cover
            latest = min(now + self.paced.window, reach)
        wait = self.paced.wait(row, endpoint, now=now, latest=latest)
        if wait is None:
            return False
        if wait.until is None:
            self._give_back(row)
        elif latest is not None and wait.until <= latest:
            self.paced.hold(row, wait.until)
        else:
            deferral = Deferral(until=wait.until, reason=wait.reason)
            paced = pending_channels(row) if wait.whole_row else [Channel.WEBHOOK]
            # A channel deferred already (its circuit is open) keeps its own deferral.
            self._send_row(
                row, gated=None, deferred={**dict.fromkeys(paced, deferral), **deferred}, now=now
            )
        return True

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
        deferred = {**quiet_hours(row), **deferred}
        pending = channels_to_send(row, deferred)
        away = [c for c in pending if c in self.carriers]
        if len(away) == len(pending) and (away or deferred):
            self._expect(row, away, here=False, deferred=deferred, now=now)
            return
        if self.workers.full:
            self.queued.append(row)  # admitted again when a worker is free
            return
        if gated is not None and not self._on_a_slot(row, gated.pk, slot_taken, now=now):
            return
        self._expect(row, away, here=True, deferred=deferred, now=now)
        if gated is not None:
            self.gate.started(gated.pk)
        self.workers.start(
            row,
            endpoint=self.endpoints.get(row.webhook_endpoint_id),
            slot_of=gated.pk if gated is not None else None,
            now=now,
            deferred=deferred,
            elsewhere=frozenset(away),
        )

    def _expect(
        self, row: Notification, away: list[str], *, here: bool, deferred: dict, now: datetime
    ) -> None:
        self.joiner.expect(row, pieces=len(away) + here, at=now, deferred=deferred)
        for channel in away:
            self.carriers[channel].take(row)

    def collect(self, done: set[Future]) -> None:
        now = self.tick.clock.now()
        claiming = self.claiming
        for row, endpoint_id, outcome in self.workers.back(done):
            delivery = outcome if isinstance(outcome, RowDelivery) else None
            if not isinstance(outcome, RowDelivery):
                self.joiner.broke(row, outcome)
            signal = None
            if endpoint_id is not None:
                # Free its slot here, apply the attempt to the circuit, start who waited.
                signal = self.endpoints.finished(endpoint_id, delivery, now=now)
                self._start_waiting(endpoint_id, now=now)
                self.claims.finished(endpoint_id)
            if delivery is not None:
                self.endpoints.settled(delivery)
                self.joiner.settle(
                    row, results=delivery.results, deferred=delivery.deferred, signal=signal
                )
        if claiming is not None and claiming in done:
            self._claimed(claiming)

    def send(self) -> None:
        now = self.tick.clock.now()
        if self.tick.stop.is_set():
            for row in self.paced.give_up():
                self._give_back(row)
        for row in self.paced.due(now=now):
            self.start(row)
        if self.paced.reopened(now=now):
            self.claims.room_again()
        while self.queued and not self.workers.full:
            self.start(self.queued.popleft())
        self._take_slots()
        self.workers.flush()
        self.slots.tend(queued=self.queued, now=self.tick.clock.now())

    def _take_slots(self) -> None:
        """Take the slots the rows about to start want (and more of those endpoints whose
        rows wait while more may be had) in one statement, then start those rows, or hold
        them back when their endpoint had no slot for them."""
        now = self.tick.clock.now()
        rows, self.wanting = self.wanting, []
        grown = self.slots.take_for(rows, now=now)
        if grown is None:
            self.tick.summary.errors += len(rows)  # the connection is lost
            return
        for row in rows:
            endpoint = self.endpoints.get(row.webhook_endpoint_id)
            self._send_row(row, gated=endpoint, deferred={}, now=now, slot_taken=True)
        for endpoint_id in grown:
            self._start_waiting(endpoint_id, now=now)

    def _on_a_slot(
        self, row: Notification, endpoint_id: Any, slot_taken: bool, *, now: datetime
    ) -> bool:
        """Whether a slot this tick holds is free for the row's webhook. If not, the row
        waits for the step's slot taking, or once that was tried, for a slot of those
        running here, or goes back unattempted."""
        if self.slots.slot_free(endpoint_id, now=now):
            return True
        if not slot_taken:
            self.wanting.append(row)
        elif not self.slots.wait_for_slot(row, endpoint_id):
            self._give_back(row)
        return False

    def _give_back(self, row: Notification) -> None:
        release(row, buffer=self.buffer)
        self.claims.gave_back()

    def _start_waiting(self, endpoint_id: Any, *, now: datetime) -> None:
        while (row := self.gate.next_waiting(endpoint_id, now=now)) is not None:
            self.start(row)


class RowClaims:
    def __init__(
        self,
        tick: Tick,
        *,
        gate: EndpointGate,
        paced: PacedRows,
        claim: Callable[..., Claimed],
        leave: Q | None,
    ) -> None:
        """`claim` claims due rows (notification_claim); `leave`: the rows other lanes
        claim."""
        self.tick, self.gate, self.notification_claim, self.leave = tick, gate, claim, leave
        self.paced = paced
        self.exhausted = False
        # Rows of busy endpoints were left for later (not claimed, or released), so coming
        # up short did not mean nothing is due: claim again once one of their slots frees.
        self.left_for_later = False
        # The endpoints the last claim took a full share of: more of their rows may be due.
        self.capped: set[Any] = set()
        # A row went back since the running claim was asked for.
        self.gave_back_since_request = False

    def wanted(self, *, free: int, running: int, queued: int) -> bool:
        """Whether to claim now, with `free` workers, `running` rows in flight and `queued`
        waiting for a worker: for the free workers, for the fast endpoints' queues, or
        ahead, once the rows waiting for a worker fall to half of what the tick delivers
        in AHEAD_SECONDS."""
        concurrency = self.tick.config.concurrency
        return (
            not self.exhausted
            and self.tick.may_claim()
            and (
                (free > 0 and (free * 2 >= concurrency or not running))
                or self._refills(queued) > 0
                or queued * 2 < self._ahead()
            )
        )

    def _ahead(self) -> int:
        """How many rows may wait for a worker here: what the tick delivers in
        AHEAD_SECONDS at its recent pace, a batch at most. A claim then runs while the
        workers still have rows, instead of after they ran out (a claim deep in a backlog
        takes tens of milliseconds, in which they would idle); and a row claimed ahead
        waits a fraction of a second, well within its lease. None while the tick has no
        pace, or on a clock that never moves."""
        tick = self.tick
        if not tick.clock.moves:
            return 0
        pace = self.gate.pace(now=tick.clock.now())
        return min(tick.config.batch, int(pace * AHEAD_SECONDS))

    def request(self, *, free: int, queued: int, known: frozenset) -> "ClaimRequest":
        """What the next claim asks for: what the free workers and the fast endpoints'
        queues have room for (no more of one endpoint's rows than it can start or hold
        waiting); `known`: the endpoints whose rows the lane has already."""
        tick, now = self.tick, self.tick.clock.now()
        limits = self.paced.limits(
            self.gate.claim_limits(now=now), share=tick.config.endpoint_share, now=now
        )
        extra = max(0 if queued else limits.extra, self._ahead() - queued)
        self.gave_back_since_request = False
        return ClaimRequest(
            now=now,
            wanted=tick.claim_room(min(max(free, 0) + extra, tick.config.batch)),
            limits=limits,
            known=known,
        )

    def claim(self, request: "ClaimRequest") -> Claimed:
        """Run the claim (on the database thread and its connection)."""
        tick, limits = self.tick, request.limits
        return self.notification_claim(
            now=request.now,
            lease=tick.config.lease,
            limit=request.wanted,
            skip_endpoints=limits.skip,
            per_endpoint=tick.config.endpoint_share,
            endpoint_caps=limits.caps,
            only=~self.leave if self.leave is not None else None,
        )

    def note(self, claimed: Claimed, request: "ClaimRequest") -> None:
        """What the claim brought says whether to claim again soon."""
        self._note(claimed, wanted=request.wanted, limits=request.limits)
        if self.gave_back_since_request:
            # Rows given back while the claim ran were not there for it to see.
            self.exhausted, self.left_for_later = False, True
        self.tick.summary.claimed += len(claimed)

    def gave_back(self) -> None:
        """A claimed row went back unattempted: coming up short then says nothing."""
        self.left_for_later = self.gave_back_since_request = True

    def started(self) -> None:
        """The claimed rows started: short of rows, yet an endpoint that took its full share
        can take more at once (its rows were deferred, say): claim again rather than wait."""
        now = self.tick.clock.now()
        if any(self._wants_more(endpoint_id, now=now) for endpoint_id in self.capped):
            self.exhausted = False

    def finished(self, endpoint_id: Any) -> None:
        """A delivery to the endpoint came back: claim again once an endpoint whose rows were
        left can take more — not on every delivery (each claim ranks every due row), but when
        its queue runs low."""
        now = self.tick.clock.now()
        if self.left_for_later and self._wants_more(endpoint_id, now=now):
            self.exhausted = False

    def room_again(self) -> None:
        """A paced endpoint the last claim left alone has free slots again."""
        if self.left_for_later:
            self.exhausted = False

    def _wants_more(self, endpoint_id: Any, *, now: datetime) -> bool:
        return self.gate.wants_more(endpoint_id, now=now) and self.paced.wants_more(
            endpoint_id, now=now
        )

    def _refills(self, queued: int) -> int:
        # Rows queued for a worker mean the workers, not the endpoints, are the limit:
        # claiming ahead for the endpoints' queues would only make rows wait longer here.
        return 0 if queued else self.gate.refills(now=self.tick.clock.now())

    def _note(self, claimed: Claimed, *, wanted: int, limits: ClaimLimits) -> None:
        per_endpoint = Counter(row.webhook_endpoint_id for row in claimed)
        per_endpoint.pop(None, None)
        # A short claim drained the queue only if no other tick took rows it ranked; one
        # that took an endpoint's full share may have left more of its rows due.
        short = len(claimed) < wanted
        self.exhausted = short and claimed.drained
        self.capped = self.gate.claimed(per_endpoint, limits, full=not short)
        self.left_for_later = bool(limits.skip or self.capped)


@dataclass(frozen=True)
class ClaimRequest:
    """One claim as the lane asks for it: at `now`, `wanted` rows within `limits`;
    `known` endpoints need no loading."""

    now: datetime
    wanted: int
    limits: ClaimLimits
    known: frozenset


@dataclass(frozen=True)
class FetchedClaim:
    """What a claim brought: its rows, their endpoints not known before, and the database
    error that cut it short after the rows were claimed (they then stay claimed until their
    leases expire)."""

    request: ClaimRequest
    claimed: Claimed
    endpoints: dict[Any, WebhookEndpoint]
    failed: DatabaseError | None = None


def fetch_claim(claims: RowClaims, request: ClaimRequest) -> FetchedClaim:
    """Claim, load the new endpoints and apply what the products decide for the rows (hooks):
    all on the database thread's connection, nothing of the lane's state touched. A database error
    in the claim itself is raised (nothing was claimed)."""
    claimed = claims.claim(request)
    endpoints = {row.webhook_endpoint_id for row in claimed} - {None} - request.known
    try:
        loaded = WebhookEndpoint.objects.in_bulk(endpoints) if endpoints else {}
        hooks.claimed(claimed, now=request.now)
    except DatabaseError as exc:
        return FetchedClaim(request=request, claimed=claimed, endpoints={}, failed=exc)
    return FetchedClaim(request=request, claimed=claimed, endpoints=loaded)
