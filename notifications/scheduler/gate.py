"""Endpoint isolation inside one tick: how many deliveries each webhook endpoint may have in
flight, and what its circuit says. The tick asks `admit` before a row's webhook goes out and
tells `finish` when it came back; `saturated` names the endpoints the next claim should leave
alone, so one slow receiver cannot take the whole pool.

A row that finds its endpoint busy may wait for a slot, but only `depth` rows deep (whole
waves of the endpoint's slots, as many as the lease covers), so its lease still covers the
wait and its own work; beyond that it is released unattempted for a later claim.
"""

from collections import Counter, deque
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from notifications.scheduler import breaker
from notifications.scheduler.breaker import Circuit


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

    def __post_init__(self) -> None:
        self.circuits: dict[Any, Circuit] = {}
        self.in_flight: Counter = Counter()
        self.waiting: dict[Any, deque] = {}

    def know(self, endpoint_id: Any, circuit: Circuit) -> None:
        """Take the database's view of an endpoint's circuit (after a load or a write)."""
        self.circuits[endpoint_id] = circuit

    def circuit(self, endpoint_id: Any) -> Circuit:
        return self.circuits.get(endpoint_id, Circuit())

    def admit(self, endpoint_id: Any, *, now: datetime) -> Admission:
        """Whether a delivery to the endpoint may start now, wait for a slot, must be
        released for a later claim, or is deferred because the circuit is open."""
        circuit = self.circuit(endpoint_id)
        if circuit.is_open(now):
            return Admission.DEFER
        if self.in_flight[endpoint_id] < self._slots(circuit, now):
            return Admission.START
        queue = self.waiting.get(endpoint_id, ())
        if len(queue) < self.depth:
            return Admission.WAIT
        return Admission.RELEASE

    def started(self, endpoint_id: Any) -> None:
        self.in_flight[endpoint_id] += 1

    def wait(self, endpoint_id: Any, item: Any) -> None:
        self.waiting.setdefault(endpoint_id, deque()).append(item)

    def finish(
        self, endpoint_id: Any, *, ok: bool, category: str, now: datetime, backpressure: bool
    ) -> breaker.Signal | None:
        """Free the slot and apply the attempt to the circuit; the attempt's signal when it
        says something new about the endpoint (so it must be written down), else None."""
        self.in_flight[endpoint_id] -= 1
        signal = breaker.signal_of(ok=ok, category=category, backpressure=backpressure)
        if signal is None:
            return None
        before = self.circuit(endpoint_id)
        if signal is breaker.Signal.ALIVE and before.healthy:
            return None
        self.circuits[endpoint_id] = breaker.after(
            before, signal, now=now, threshold=self.threshold
        )
        return signal

    def next_waiting(self, endpoint_id: Any, *, now: datetime) -> Any | None:
        """A waiting item of the endpoint, once a slot is free for it or the circuit opened
        (`admit` then says which); None while it must keep waiting."""
        queue = self.waiting.get(endpoint_id)
        if not queue:
            return None
        circuit = self.circuit(endpoint_id)
        if circuit.is_open(now) or self.in_flight[endpoint_id] < self._slots(circuit, now):
            return queue.popleft()
        return None

    def saturated(self, *, now: datetime) -> set[Any]:
        """Endpoints with no free slot now: the next claim skips their rows."""
        return {
            endpoint_id
            for endpoint_id, count in self.in_flight.items()
            if count >= self._slots(self.circuit(endpoint_id), now)
        }

    def _slots(self, circuit: Circuit, now: datetime) -> int:
        # Half-open: a single delivery probes the endpoint.
        return 1 if circuit.is_half_open(now, threshold=self.threshold) else self.capacity
