"""The endpoint gate: how one tick keeps each webhook endpoint isolated from the others.

`WEBHOOK_ENDPOINT_CONCURRENCY` bounds the deliveries in flight to one endpoint across every
tick process on every machine: a tick starts a webhook delivery only on a slot it holds in
the database (`dbqueue.slots`). `EndpointSlots` takes slots for the deliveries it is about
to start (one statement for every endpoint of a step), keeps them while it uses them, renews
them before their lease runs out and frees those it has had no use for during
LINGER_SECONDS, so other ticks can take them. An endpoint whose slots all belong to other
ticks is `blocked`: its claimed rows go back unattempted and the next claims leave its rows
to the ticks that hold it, for a second at first, twice as long each time it is found
blocked again. When its circuit is half-open, only the holder of slot 0 probes it, so one
probe goes out in all.

`EndpointGate` decides, on those slots, how many deliveries each endpoint may have in flight
here and what its circuit says. The row lane asks `admit` before a row's webhook goes out
and tells `finish` when it came back (`finish` is the one place an attempt becomes a circuit
signal; the write-back replays that signal on the database's copy of the circuit);
`claim_limits` says how many rows of each endpoint the next claim may take (none of an
endpoint with no room), so one slow receiver cannot take the whole pool.

A row that finds its endpoint busy may wait for a slot, but only as deep as its lease covers
the wait: `depth` rows (two waves of the endpoint's slots at the worst-case channel timeout)
while the endpoint's pace is unknown, and as many waves as its observed pace fits in `window`
seconds (up to `most` rows) once it is known. Beyond that a row is released unattempted for a
later claim. A fast endpoint's burst is thus claimed in batches, not a few rows at a time;
and since its pace can change, `writeback.may_start` checks again, when a row starts, that
the row's lease still covers its delivery.

`Endpoints` holds the endpoints' rows, loaded once a tick (again after a 410), hands their
circuits as the database has them to the gate, and says what a delivery's outcome means for
its endpoint.
"""

from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, Protocol

from django.db import DatabaseError

from dbqueue.slots import SlotHolder
from delivery import circuits
from delivery.circuits import Circuit, Signal, circuit_of
from delivery.models import Channel, Notification, WebhookEndpoint, slot_scope
from delivery.scheduler.context import Tick
from delivery.scheduler.deliver import RowDelivery, pending_channels
from outbound.categories import ErrorCategory

# How many of an endpoint's latest deliveries set its pace (the slowest of them).
PACE_SAMPLES = 8
# A pace faster than this is taken as this (a clock's resolution, not a promise).
FASTEST_PACE = 0.001
# How far ahead of its own pace a tick claims for the queues of fast endpoints: enough for
# claims of a batch, little enough that what it could not start soon stays due for other
# tick processes (and never waits out its lease in this one's queues).
LOOKAHEAD_SECONDS = 5.0
# The deliveries of the last this many seconds set the tick's pace.
TICK_PACE_SECONDS = 10.0
# How long the next claims leave alone an endpoint whose slots other ticks hold, at first.
BLOCKED_SECONDS = 1.0
BLOCKED_MOST_SECONDS = 16.0
# The slot that probes a half-open endpoint.
PROBE_SLOT = 0
# How often a tick tries to take more slots of an endpoint whose rows wait for them.
GROW_SECONDS = 0.5
# How long a tick keeps slots it has no use for before it frees them: a burst over many
# endpoints brings each of them a row every moment, and freeing and taking slots row by
# row would cost two statements a row.
LINGER_SECONDS = 1.0
# How often a tick looks over the slots it holds for ones to free or renew. The look costs
# one pass over every endpoint held (2,000 in a wide fan-out); made after every step, it
# took more of the tick's thread than the deliveries it started.
TEND_SECONDS = 0.05
# The circuit of an endpoint the tick has no word of: closed (asked several times a row).
_CLOSED = Circuit()


@dataclass(frozen=True)
class ClaimLimits:
    """What the next claim may take: nothing of the endpoints in `skip`, `caps[e]` rows of
    endpoint `e` where the tick knows better than the default share, and `extra` rows
    beyond the free worker slots (`EndpointGate.refills`)."""

    skip: frozenset = frozenset()
    caps: dict = field(default_factory=dict)
    extra: int = 0


class Slots(Protocol):
    """Where the gate learns how many deliveries an endpoint may have in flight in this
    tick: the slots it holds of those every tick process shares (`EndpointSlots`)."""

    def usable(self, endpoint_id: Any, *, half_open: bool, now: datetime) -> int:
        """Deliveries that may run on the slots this tick holds now."""

    def ceiling(self, endpoint_id: Any, *, half_open: bool, now: datetime) -> int:
        """The most this tick may hope to run (slots it may still take included)."""

    def unavailable(self, *, now: datetime) -> set:
        """Endpoints whose slots are all elsewhere: the next claims leave them alone."""


class Admission(Enum):
    START = "start"
    WAIT = "wait"
    RELEASE = "release"
    DEFER = "defer"


@dataclass
class EndpointGate:
    capacity: int
    threshold: int
    depth: int
    slots: Slots
    # The deepest a fast endpoint's queue may get, and how long its rows may wait there.
    most: int = 0
    window: float = 0.0
    # The rows of one endpoint a claim takes while the tick knows nothing better.
    share: int = 0

    def __post_init__(self) -> None:
        self.circuits: dict[Any, Circuit] = {}
        # Endpoints whose circuit is not healthy (open, half-open or counting failures).
        self.unhealthy: set[Any] = set()
        # Deliveries running per endpoint; an endpoint with none has no key.
        self.in_flight: Counter = Counter()
        # Rows waiting for a slot per endpoint; an endpoint with none has no key.
        self.waiting: dict[Any, deque] = {}
        self.durations: dict[Any, deque] = {}
        # depth_of each endpoint, asked several times a delivery: known until its pace moves.
        self.depths: dict[Any, int] = {}
        # Endpoints whose last claim took all it might: more of their rows may be due.
        self.backlogged: set[Any] = set()
        # When this tick's recent deliveries finished (its own pace, all endpoints).
        self.finishes: deque[datetime] = deque()

    def know(self, endpoint_id: Any, circuit: Circuit) -> None:
        """Take the database's view of an endpoint's circuit (after a load or a write)."""
        self._set_circuit(endpoint_id, circuit)

    def _set_circuit(self, endpoint_id: Any, circuit: Circuit) -> None:
        self.circuits[endpoint_id] = circuit
        if circuit.healthy:
            self.unhealthy.discard(endpoint_id)
        else:
            self.unhealthy.add(endpoint_id)

    def circuit(self, endpoint_id: Any) -> Circuit:
        return self.circuits.get(endpoint_id, _CLOSED)

    def admit(self, endpoint_id: Any, *, now: datetime) -> Admission:
        """Whether a delivery to the endpoint may start now (on a slot held, or one the
        tick may still take), wait for a slot, must be released for a later claim, or is
        deferred because the circuit is open."""
        circuit = self.circuit(endpoint_id)
        if circuit.is_open(now):
            return Admission.DEFER
        slots = self._ceiling(endpoint_id, circuit, now)
        if self.in_flight[endpoint_id] < slots:
            return Admission.START
        if slots == 0:
            # Another tick holds every slot: nothing here will free one for this row.
            return Admission.RELEASE
        queue = self.waiting.get(endpoint_id, ())
        if len(queue) < self.depth_of(endpoint_id):
            return Admission.WAIT
        return Admission.RELEASE

    def depth_of(self, endpoint_id: Any) -> int:
        """How many rows of the endpoint may wait for its slots: `depth` while its pace is
        unknown; once known, the waves of its slots that fit in `window` at the pace of
        its slowest recent delivery, less one wave of slack (never below `depth`, never
        above `most`)."""
        depth = self.depths.get(endpoint_id)
        if depth is None:
            depth = self.depths[endpoint_id] = self._depth(self.durations.get(endpoint_id))
        return depth

    def _depth(self, recent: deque | None) -> int:
        if not recent or self.window <= 0:
            return self.depth
        waves = int(self.window / max(max(recent), FASTEST_PACE)) - 1
        return max(self.depth, min(self.most, self.capacity * waves))

    def room(self, endpoint_id: Any, *, now: datetime) -> int:
        """Rows of the endpoint a claim may take now: its free slots and free queue."""
        slots = self._ceiling(endpoint_id, self.circuit(endpoint_id), now)
        if slots == 0:
            return 0
        free = max(0, slots - self.in_flight[endpoint_id])
        return free + self.depth_of(endpoint_id) - len(self.waiting.get(endpoint_id, ()))

    def claim_limits(self, *, now: datetime) -> ClaimLimits:
        """What the next claim may take of the endpoints this tick is busy with (see
        ClaimLimits): those with deliveries running or rows waiting here, those whose last
        claim took all it might, and those whose circuit is not healthy. Any other gets the
        default share: an idle fast endpoint whose claim fills that share is backlogged
        from then on, so the claim after takes what its pace has room for. Looking only at
        these keeps a claim's cost to what the tick is doing, not to every endpoint it has
        ever delivered to (2,000 in a wide fan-out)."""
        skip, caps = self.slots.unavailable(now=now), {}
        busy = self.in_flight.keys() | self.waiting.keys() | self.backlogged | self.unhealthy
        for endpoint_id in busy:
            room = self.room(endpoint_id, now=now)
            if room <= 0:
                skip.add(endpoint_id)
                continue
            if room != self.share:
                caps[endpoint_id] = room
        return ClaimLimits(skip=frozenset(skip), caps=caps, extra=self.refills(now=now))

    def refills(self, *, now: datetime) -> int:
        """Rows the queues of fast endpoints (deeper than `depth`) with rows left want now
        (those at most half full), which need no free worker to be claimed: rows of slower
        ones wait, as before, in place of a free worker."""
        wanted = 0
        for endpoint_id in self.backlogged:
            depth = self.depth_of(endpoint_id)
            if depth > self.depth and self.wants_more(endpoint_id, now=now):
                wanted += depth - len(self.waiting.get(endpoint_id, ()))
        return min(wanted, self.lookahead_room(now=now)) if wanted else 0

    def lookahead_room(self, *, now: datetime) -> int:
        """How many more rows every queue together may take: LOOKAHEAD_SECONDS of this
        tick's recent pace (a claim's worth, `most`, while it has none), less those waiting."""
        most = max(self.most, int(self.pace(now=now) * LOOKAHEAD_SECONDS))
        return max(0, most - sum(len(queue) for queue in self.waiting.values()))

    def pace(self, *, now: datetime) -> float:
        """This tick's deliveries per second over the last TICK_PACE_SECONDS (0 for none)."""
        while self.finishes and (now - self.finishes[0]).total_seconds() > TICK_PACE_SECONDS:
            self.finishes.popleft()
        if not self.finishes:
            return 0.0
        return len(self.finishes) / max(1.0, (now - self.finishes[0]).total_seconds())

    def claimed(self, counts: Counter, limits: ClaimLimits, *, full: bool) -> set[Any]:
        """Note what a claim took per endpoint; returns the endpoints of which more rows
        may be due: those it took a full share of, or any it took if it was `full`
        (it took as many rows as it asked for)."""
        capped = set()
        for endpoint_id in counts.keys() | limits.caps.keys():
            most = limits.caps.get(endpoint_id, self.share)
            if counts[endpoint_id] >= most or (full and counts[endpoint_id]):
                capped.add(endpoint_id)
        self.backlogged = (self.backlogged - counts.keys() - limits.caps.keys()) | capped
        return capped

    def wants_more(self, endpoint_id: Any, *, now: datetime) -> bool:
        """Whether a claim should come for the endpoint now: its queue is at most half
        full (for an endpoint of unknown or slow pace: it has a free slot)."""
        depth = self.depth_of(endpoint_id)
        if depth <= self.depth:
            circuit = self.circuit(endpoint_id)
            return self.in_flight[endpoint_id] < self._ceiling(endpoint_id, circuit, now)
        return self.room(endpoint_id, now=now) * 2 >= depth

    def started(self, endpoint_id: Any) -> None:
        self.in_flight[endpoint_id] += 1

    def wait(self, endpoint_id: Any, item: Any) -> None:
        self.waiting.setdefault(endpoint_id, deque()).append(item)

    def finish(
        self,
        endpoint_id: Any,
        *,
        ok: bool,
        category: str,
        now: datetime,
        backpressure: bool,
        seconds: float | None = None,
    ) -> circuits.Signal | None:
        """Free the slot, note how long the attempt took (`seconds`, None when unknown) and
        apply it to the circuit; the attempt's signal when it says something new about the
        endpoint (so it must be written down), else None."""
        self.in_flight[endpoint_id] -= 1
        if self.in_flight[endpoint_id] <= 0:
            del self.in_flight[endpoint_id]
        self.finishes.append(now)
        if seconds is not None:
            self.durations.setdefault(endpoint_id, deque(maxlen=PACE_SAMPLES)).append(seconds)
            self.depths.pop(endpoint_id, None)
        signal = circuits.signal_of(ok=ok, category=category, backpressure=backpressure)
        if signal is None:
            return None
        before = self.circuit(endpoint_id)
        if signal is circuits.Signal.ALIVE and before.healthy:
            return None
        self._set_circuit(
            endpoint_id, circuits.after(before, signal, now=now, threshold=self.threshold)
        )
        return signal

    def next_waiting(self, endpoint_id: Any, *, now: datetime) -> Any | None:
        """A waiting item of the endpoint, once a slot it holds is free for it or the
        circuit opened (`admit` then says which); None while it must keep waiting."""
        queue = self.waiting.get(endpoint_id)
        if not queue:
            return None
        circuit = self.circuit(endpoint_id)
        half_open = circuit.is_half_open(now, threshold=self.threshold)
        if (
            circuit.is_open(now)
            or self.in_flight[endpoint_id]
            < self.slots.usable(endpoint_id, half_open=half_open, now=now)
            # With no slot to hope for (another tick holds them all), `admit` releases it.
            or self.slots.ceiling(endpoint_id, half_open=half_open, now=now) == 0
        ):
            item = queue.popleft()
            if not queue:
                del self.waiting[endpoint_id]
            return item
        return None

    def half_open(self, endpoint_id: Any, *, now: datetime) -> bool:
        """The circuit's interval is over but no delivery proved the endpoint alive yet:
        a single delivery probes it."""
        return self.circuit(endpoint_id).is_half_open(now, threshold=self.threshold)

    def _ceiling(self, endpoint_id: Any, circuit: Circuit, now: datetime) -> int:
        half_open = circuit.is_half_open(now, threshold=self.threshold)
        return self.slots.ceiling(endpoint_id, half_open=half_open, now=now)


class EndpointSlots:
    """The endpoint slots one tick holds, and its gate, which asks them what it may run."""

    def __init__(self, tick: Tick) -> None:
        self.tick = tick
        config = tick.config
        self.capacity = config.endpoint_concurrency
        self.holder = SlotHolder(capacity=self.capacity, lease=config.lease)
        # Endpoints whose slots other ticks hold: until when, and how often in a row.
        self.blocked_until: dict[Any, datetime] = {}
        self.blocked_times: dict[Any, int] = {}
        # Since when (the tick's elapsed seconds) this tick has held more of an endpoint's
        # slots than it uses.
        self.surplus_since: dict[Any, float] = {}
        # The endpoint of each slot scope this tick has used, and the other way round.
        self.endpoint_of: dict[str, Any] = {}
        self.scope_of: dict[Any, str] = {}
        # When (elapsed seconds) the tick last tried to take more slots of an endpoint.
        self.grown_at: dict[Any, float] = {}
        # When (elapsed seconds) the tick last looked over the slots it holds.
        self.tended_at = -TEND_SECONDS
        self.gate = EndpointGate(
            capacity=self.capacity,
            threshold=config.circuit_failures,
            depth=config.waiting_depth,
            slots=self,
            most=config.batch,
            window=config.wait_window,
            share=config.endpoint_share,
        )

    # --- the gate's view of the slots ------------------------------------------------------

    def usable(self, endpoint_id: Any, *, half_open: bool, now: datetime) -> int:
        """How many deliveries to the endpoint may run here on the slots held: all of
        them, or while the circuit is half-open the probe slot alone."""
        held = self.holder.slots(self._scope(endpoint_id))
        return int(PROBE_SLOT in held) if half_open else len(held)

    def ceiling(self, endpoint_id: Any, *, half_open: bool, now: datetime) -> int:
        """The most deliveries to the endpoint this tick may hope to run: none while its
        slots are all elsewhere, else its slots (one while half-open)."""
        if self._blocked(endpoint_id, now):
            return 0
        return 1 if half_open else self.capacity

    def unavailable(self, *, now: datetime) -> set:
        """The endpoints the next claim must leave alone: their slots are all elsewhere."""
        return {e for e in self.blocked_until if self._blocked(e, now)}

    def slot_free(self, endpoint_id: Any, *, now: datetime) -> bool:
        """A slot this tick holds is free for one more delivery to the endpoint."""
        half_open = self.gate.half_open(endpoint_id, now=now)
        usable = self.usable(endpoint_id, half_open=half_open, now=now)
        return self.gate.in_flight[endpoint_id] < usable

    def take_for(self, rows: list[Notification], *, now: datetime) -> list | None:
        """Take slots for the rows about to start (they have none free) and for the
        endpoints whose rows wait while more slots may be had: one statement, none when
        nothing wants one. The endpoints whose waiting rows may start now (None when the
        connection was lost)."""
        growing = self.growing(now=now)
        if not rows and not growing:
            return []
        more = Counter(row.webhook_endpoint_id for row in rows) + Counter(growing)
        return list(growing) if self.acquire(more, now=now) else None

    def wait_for_slot(self, row: Notification, endpoint_id: Any) -> bool:
        """Queue a row that found no slot free for it behind the endpoint's deliveries
        running here; False when none runs here or its queue is full (the row goes back)."""
        gate = self.gate
        queue = gate.waiting.get(endpoint_id, ())
        if gate.in_flight[endpoint_id] and len(queue) < gate.depth_of(endpoint_id):
            gate.wait(endpoint_id, row)
            return True
        return False

    def growing(self, *, now: datetime) -> dict[Any, int]:
        """The endpoints whose rows wait for a slot while this tick might take more (at
        most every GROW_SECONDS each), with how many wait."""
        elapsed = self.tick.clock.elapsed()
        growing = {}
        for endpoint_id, queue in self.gate.waiting.items():
            if not queue or elapsed - self.grown_at.get(endpoint_id, -GROW_SECONDS) < GROW_SECONDS:
                continue
            half_open = self.gate.half_open(endpoint_id, now=now)
            usable = self.usable(endpoint_id, half_open=half_open, now=now)
            if usable < self.ceiling(endpoint_id, half_open=half_open, now=now):
                growing[endpoint_id] = len(queue)
                self.grown_at[endpoint_id] = elapsed
        return growing

    # --- taking, renewing and freeing ------------------------------------------------------

    def acquire(self, more: Mapping[Any, int], *, now: datetime) -> bool:
        """Hold enough slots of each endpoint for the deliveries running here and `more[e]`
        besides, as far as free slots allow, renewing every lease that runs low on the
        way: one statement. An endpoint that got none is blocked. False when the
        connection was lost."""
        if self.tick.lost is not None:
            return False
        renew = self.holder.expiring(now=now, within=self._renew_within)
        scopes = {scope: len(self.holder.slots(scope)) for scope in renew}
        for endpoint_id, extra in more.items():
            scopes[self._scope(endpoint_id)] = self.gate.in_flight[endpoint_id] + extra
        try:
            self.holder.take(scopes, now=now)
        except DatabaseError as exc:
            if self.tick.lose(exc):
                return False
            raise
        for endpoint_id in more:
            half_open = self.gate.half_open(endpoint_id, now=now)
            if self.usable(endpoint_id, half_open=half_open, now=now):
                self.blocked_times.pop(endpoint_id, None)
                self.blocked_until.pop(endpoint_id, None)
            else:
                self._block(endpoint_id, now=now)
        return True

    def tend(self, *, queued: Iterable[Notification], now: datetime) -> None:
        """Free the slots held beyond what the deliveries running, waiting or `queued` for
        a worker here have needed for LINGER_SECONDS, and renew the leases that run low:
        a statement each, only when there is something to do; at most every TEND_SECONDS."""
        if self.tick.lost is not None:
            return
        elapsed = self.tick.clock.elapsed()
        if elapsed - self.tended_at < TEND_SECONDS:
            return
        self.tended_at = elapsed
        busy = self.gate.in_flight + Counter(row.webhook_endpoint_id for row in queued)
        busy.update({endpoint_id: len(rows) for endpoint_id, rows in self.gate.waiting.items()})
        try:
            self.holder.release(self._surplus(busy))
        except DatabaseError as exc:
            if not self.tick.lose(exc):
                raise
            return
        if self.holder.expiring(now=now, within=self._renew_within):
            self.acquire({}, now=now)

    def pause(self, *, now: datetime) -> float | None:
        """Seconds until a held lease must be renewed (None when nothing is held)."""
        if not self.holder.until:
            return None
        earliest = min(self.holder.until.values()) - self._renew_within
        return max(0.0, (earliest - now).total_seconds())

    def close(self) -> None:
        """Free every slot held (the tick is over); a lost connection frees them by lease."""
        if self.tick.lost is not None:
            return
        try:
            self.holder.release_all()
        except DatabaseError as exc:
            self.tick.lose(exc)

    def _surplus(self, busy: Mapping[Any, int]) -> dict[str, list[int]]:
        """The slots to free: of each endpoint held beyond its use for LINGER_SECONDS, the
        highest-numbered ones it does not need."""
        elapsed = self.tick.clock.elapsed()
        surplus: dict[str, list[int]] = {}
        for scope, held in list(self.holder.held.items()):
            endpoint_id = self.endpoint_of[scope]
            extra = len(held) - busy.get(endpoint_id, 0)
            if extra <= 0:
                self.surplus_since.pop(endpoint_id, None)
                continue
            since = self.surplus_since.setdefault(endpoint_id, elapsed)
            if elapsed - since >= LINGER_SECONDS:
                surplus[scope] = sorted(held)[-extra:]
                self.surplus_since.pop(endpoint_id)
        return surplus

    @property
    def _renew_within(self) -> timedelta:
        # Renewed while about two deliveries' worth of lease is left, so the tick may sleep
        # through one delivery and still start the next on a covered slot.
        config = self.tick.config
        return min(2 * config.start_cover, config.lease / 2)

    def _blocked(self, endpoint_id: Any, now: datetime) -> bool:
        until = self.blocked_until.get(endpoint_id)
        return until is not None and now < until

    def _block(self, endpoint_id: Any, *, now: datetime) -> None:
        times = self.blocked_times.get(endpoint_id, 0) + 1
        self.blocked_times[endpoint_id] = times
        seconds = min(BLOCKED_MOST_SECONDS, BLOCKED_SECONDS * 2 ** (times - 1))
        self.blocked_until[endpoint_id] = now + timedelta(seconds=seconds)

    def _scope(self, endpoint_id: Any) -> str:
        # Asked several times a delivery: a UUID is formatted once an endpoint.
        scope = self.scope_of.get(endpoint_id)
        if scope is None:
            scope = self.scope_of[endpoint_id] = slot_scope(endpoint_id)
            self.endpoint_of[scope] = endpoint_id
        return scope


class Endpoints:
    """The webhook endpoints of one tick's row lane."""

    def __init__(self, gate: EndpointGate) -> None:
        self.gate = gate
        self.rows: dict[Any, WebhookEndpoint] = {}

    def know(self, loaded: Mapping[Any, WebhookEndpoint]) -> None:
        """Endpoints a claim loaded (rowlane.fetch_claim), with their circuits as the
        database has them."""
        self.rows.update(loaded)
        for endpoint in loaded.values():
            self.gate.know(endpoint.pk, circuit_of(endpoint))

    def get(self, endpoint_id: Any) -> WebhookEndpoint | None:
        return self.rows.get(endpoint_id)

    def settled(self, delivery: RowDelivery) -> None:
        """Reload from the database, for later rows, an endpoint that answered 410."""
        webhook = delivery.results.get(Channel.WEBHOOK)
        if webhook is not None and webhook.gone:
            self.rows.pop(delivery.notification.webhook_endpoint_id, None)

    def finished(
        self, endpoint_id: Any, delivery: RowDelivery | None, *, now: datetime
    ) -> tuple[Any, Signal] | None:
        """A delivery to the endpoint is back (None: it broke): its slot here is free again
        and the attempt applies to the circuit; its news for the circuit, if any, for the
        row's write-back."""
        result = delivery.results.get(Channel.WEBHOOK) if delivery is not None else None
        signal = self.gate.finish(
            endpoint_id,
            ok=result is not None and result.ok,
            category=result.category if result is not None else ErrorCategory.INTERNAL,
            now=now,
            backpressure=result is not None and result.backpressure,
            seconds=result.duration_ms / 1000 if result is not None else None,
        )
        return (endpoint_id, signal) if signal is not None else None

    def of(self, row: Notification) -> WebhookEndpoint | None:
        """The endpoint whose slot the row's webhook would take (None when it sends no
        webhook now, or the endpoint cannot be called anyway)."""
        if Channel.WEBHOOK not in pending_channels(row):
            return None
        endpoint = self.rows.get(row.webhook_endpoint_id)
        return endpoint if endpoint is not None and endpoint.enabled else None
