"""Endpoint isolation inside one tick: how many deliveries each webhook endpoint may have in
flight, and what its circuit says. The row lane asks `admit` before a row's webhook goes out
and tells `finish` when it came back (`finish` is the one place an attempt becomes a circuit
signal; the write-back replays that signal on the database's copy of the circuit);
`claim_limits` says how many rows of each endpoint the next claim may take (none of an
endpoint with no room), so one slow receiver cannot take the whole pool.

A row that finds its endpoint busy may wait for a slot, but only as deep as its lease covers
the wait: `depth` rows (two waves of the endpoint's slots at the worst-case channel timeout)
while the endpoint's pace is unknown, and as many waves as its observed pace fits in `window`
seconds (up to `most` rows) once it is known. Beyond that a row is released unattempted for a
later claim. A fast endpoint's burst is thus claimed in batches, not a few rows at a time;
and since its pace can change, `lane.may_start` checks again, when a row starts, that the
row's lease still covers its delivery.
"""

from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Protocol

from notifications import circuits
from notifications.circuits import Circuit

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
    tick: the slots it holds of those every tick process shares (`endpoints.Endpoints`)."""

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
        self.in_flight: Counter = Counter()
        self.waiting: dict[Any, deque] = {}
        self.durations: dict[Any, deque] = {}
        # Endpoints whose last claim took all it might: more of their rows may be due.
        self.backlogged: set[Any] = set()
        # When this tick's recent deliveries finished (its own pace, all endpoints).
        self.finishes: deque[datetime] = deque()

    def know(self, endpoint_id: Any, circuit: Circuit) -> None:
        """Take the database's view of an endpoint's circuit (after a load or a write)."""
        self.circuits[endpoint_id] = circuit

    def circuit(self, endpoint_id: Any) -> Circuit:
        return self.circuits.get(endpoint_id, Circuit())

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
        recent = self.durations.get(endpoint_id)
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
        """What the next claim may take of the endpoints this tick knows (see ClaimLimits);
        an endpoint it does not know yet gets the default share."""
        skip, caps = self.slots.unavailable(now=now), {}
        for endpoint_id in self.in_flight.keys() | self.waiting.keys() | self.durations.keys():
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
        while self.finishes and (now - self.finishes[0]).total_seconds() > TICK_PACE_SECONDS:
            self.finishes.popleft()
        most = self.most
        if self.finishes:
            span = max(1.0, (now - self.finishes[0]).total_seconds())
            most = max(most, int(len(self.finishes) / span * LOOKAHEAD_SECONDS))
        return max(0, most - sum(len(queue) for queue in self.waiting.values()))

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
        self.finishes.append(now)
        if seconds is not None:
            self.durations.setdefault(endpoint_id, deque(maxlen=PACE_SAMPLES)).append(seconds)
        signal = circuits.signal_of(ok=ok, category=category, backpressure=backpressure)
        if signal is None:
            return None
        before = self.circuit(endpoint_id)
        if signal is circuits.Signal.ALIVE and before.healthy:
            return None
        self.circuits[endpoint_id] = circuits.after(
            before, signal, now=now, threshold=self.threshold
        )
        return signal

    def next_waiting(self, endpoint_id: Any, *, now: datetime) -> Any | None:
        """A waiting item of the endpoint, once a slot it holds is free for it or the
        circuit opened (`admit` then says which); None while it must keep waiting."""
        queue = self.waiting.get(endpoint_id)
        if not queue:
            return None
        circuit = self.circuit(endpoint_id)
        half_open = self.half_open(endpoint_id, now=now)
        held = self.slots.usable(endpoint_id, half_open=half_open, now=now)
        # With no slot to hope for (another tick holds them all), `admit` releases it.
        hopeless = self._ceiling(endpoint_id, circuit, now) == 0
        if circuit.is_open(now) or self.in_flight[endpoint_id] < held or hopeless:
            return queue.popleft()
        return None

    def half_open(self, endpoint_id: Any, *, now: datetime) -> bool:
        """The circuit's interval is over but no delivery proved the endpoint alive yet:
        a single delivery probes it."""
        return self.circuit(endpoint_id).is_half_open(now, threshold=self.threshold)

    def _ceiling(self, endpoint_id: Any, circuit: Circuit, now: datetime) -> int:
        half_open = circuit.is_half_open(now, threshold=self.threshold)
        return self.slots.ceiling(endpoint_id, half_open=half_open, now=now)
