"""The slots of the webhook endpoints one tick holds in the database (`dbqueue.slots`), and
the gate (`gate.EndpointGate`) that admits deliveries on them.

`WEBHOOK_ENDPOINT_CONCURRENCY` bounds the deliveries in flight to one endpoint across every
tick process on every machine: a tick starts a webhook delivery only on a slot it holds.
It takes slots for the deliveries it is about to start (one statement for every endpoint
of a step), keeps them while it uses them, renews them before their lease runs out and
frees those it has had no use for during LINGER_SECONDS, so other ticks can take them. An
endpoint whose slots all belong to other ticks is `blocked`: its claimed rows go back
unattempted and the next claims leave its rows to the ticks that hold it, for a second at
first, twice as long each time it is found blocked again. When its circuit is half-open,
only the holder of slot 0 probes it, so one probe goes out in all.
"""

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError

from dbqueue.slots import SlotHolder
from notifications.models import Notification
from notifications.scheduler.context import Tick
from notifications.scheduler.gate import EndpointGate
from notifications.webhook_endpoints import slot_scope

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
        # The endpoint of each slot scope this tick has used.
        self.endpoint_of: dict[str, Any] = {}
        # When (elapsed seconds) the tick last tried to take more slots of an endpoint.
        self.grown_at: dict[Any, float] = {}
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
        a statement each, only when there is something to do."""
        if self.tick.lost is not None:
            return
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
        scope = slot_scope(endpoint_id)
        self.endpoint_of[scope] = endpoint_id
        return scope
