"""What the row lane knows of the webhook endpoints its rows go to: their rows (loaded once a
tick, again after a 410), and the slots of each it holds in the database (`dbqueue.slots`).

`WEBHOOK_ENDPOINT_CONCURRENCY` bounds the deliveries in flight to one endpoint across every
tick process on every machine: a tick starts a webhook delivery only on a slot it holds.
It takes an endpoint's free slots right after a claim brought rows for it (one statement for
every endpoint of the claim), renews them while it uses them and frees them as soon as it
has nothing in flight or waiting for the endpoint, so another tick can take them. An
endpoint whose slots all belong to other ticks is `blocked` for a second: its claimed rows go
back unattempted and the next claims leave its rows to the ticks that hold it. When its
circuit is half-open, only the holder of slot 0 probes it, so one probe goes out in all.
"""

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError

from dbqueue.slots import SlotHolder
from notifications.models import Channel, Notification, WebhookEndpoint
from notifications.scheduler.breaker import circuit_of
from notifications.scheduler.deliver import pending_channels
from notifications.scheduler.gate import EndpointGate
from notifications.scheduler.lane import Tick

# How long the next claims leave alone an endpoint whose slots other ticks hold.
BLOCKED_SECONDS = 1.0
# The slot that probes a half-open endpoint.
PROBE_SLOT = 0


class Endpoints:
    """The endpoints of one tick's row lane, their gate and their shared slots."""

    def __init__(self, tick: Tick) -> None:
        self.tick = tick
        config = tick.config
        self.rows: dict[Any, WebhookEndpoint] = {}
        self.holder = SlotHolder(capacity=config.endpoint_concurrency, lease=config.lease)
        self.blocked_until: dict[Any, datetime] = {}
        # The endpoint of each slot scope this tick has used.
        self.endpoint_of: dict[str, Any] = {}
        self.gate = EndpointGate(
            capacity=config.endpoint_concurrency,
            threshold=config.circuit_failures,
            depth=config.waiting_depth,
            slots=self,
            most=config.batch,
            window=config.wait_window,
            share=config.endpoint_share,
        )

    # --- the endpoints' rows ---------------------------------------------------------------

    def load(self, ids: set) -> bool:
        """The endpoints' rows: one query for those this tick has not loaded yet, their
        circuits as the database has them. False when the connection was lost."""
        missing = ids - self.rows.keys()
        if not missing:
            return True
        try:
            loaded = WebhookEndpoint.objects.in_bulk(missing)
        except DatabaseError as exc:
            if self.tick.lose(exc):
                return False
            raise
        self.rows.update(loaded)
        for endpoint in loaded.values():
            self.gate.know(endpoint.pk, circuit_of(endpoint))
        return True

    def get(self, endpoint_id: Any) -> WebhookEndpoint | None:
        return self.rows.get(endpoint_id)

    def forget(self, endpoint_id: Any) -> None:
        """Reload the endpoint for later rows (it answered 410: it is disabled now)."""
        self.rows.pop(endpoint_id, None)

    def of(self, row: Notification) -> WebhookEndpoint | None:
        """The endpoint whose slot the row's webhook would take (None when it sends no
        webhook now, or the endpoint cannot be called anyway)."""
        if Channel.WEBHOOK not in pending_channels(row):
            return None
        endpoint = self.rows.get(row.webhook_endpoint_id)
        return endpoint if endpoint is not None and endpoint.enabled else None

    # --- the shared slots ------------------------------------------------------------------

    def hold(self, rows: Iterable[Notification], *, now: datetime) -> bool:
        """Take the free slots of the endpoints the rows' webhooks go to, unless their
        circuit defers them or this tick holds enough lease on them already. False when
        the connection was lost."""
        wanted = set()
        for row in rows:
            endpoint = self.of(row)
            if endpoint is not None and not self.gate.circuit(endpoint.pk).is_open(now):
                wanted.add(endpoint.pk)
        wanted -= self._covered(now) | self.unavailable(now=now)
        return self._take(wanted, now=now)

    def admit_slots(self, endpoint_id: Any, *, now: datetime) -> bool:
        """Before one delivery starts: hold the endpoint's slots (a row queued while its
        slots were freed) with lease enough to cover it. False when the connection was
        lost."""
        if endpoint_id in self._covered(now) or self._blocked(endpoint_id, now):
            return True
        return self._take({endpoint_id}, now=now)

    def usable(self, endpoint_id: Any, *, half_open: bool, now: datetime) -> int:
        """The gate's slots of the endpoint: those this tick holds (only the probe slot
        while half-open), none while it is blocked, and all of them for an endpoint it
        has not asked for yet (a claim may bring its rows; they are held before any
        starts)."""
        if self._blocked(endpoint_id, now):
            return 0
        scope = self._scope(endpoint_id)
        if scope not in self.holder.held:
            return 1 if half_open else self.holder.capacity
        held = self.holder.slots(scope)
        return int(PROBE_SLOT in held) if half_open else len(held)

    def unavailable(self, *, now: datetime) -> set:
        """The endpoints the next claim must leave alone: their slots are all elsewhere."""
        return {e for e in self.blocked_until if self._blocked(e, now)}

    def tend(self, *, busy: set, now: datetime) -> None:
        """Free the slots of held endpoints not in `busy` (nothing in flight, waiting or
        queued for them here) and renew those whose lease runs low."""
        if self.tick.lost is not None:
            return
        idle = [scope for scope in self.holder.held if self.endpoint_of[scope] not in busy]
        try:
            self.holder.release(idle)
        except DatabaseError as exc:
            if not self.tick.lose(exc):
                raise
            return
        expiring = self.holder.expiring(now=now, within=self._renew_within)
        self._take({self.endpoint_of[scope] for scope in expiring}, now=now)

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

    @property
    def _renew_within(self) -> timedelta:
        # Renewed while about two deliveries' worth of lease is left, so the tick may sleep
        # through one delivery and still start the next on a covered slot (a start on a
        # slot with less than one left renews it first: `admit_slots`).
        config = self.tick.config
        return min(2 * config.start_cover, config.lease / 2)

    def _covered(self, now: datetime) -> set:
        cover = self.tick.config.start_cover
        return {
            self.endpoint_of[scope]
            for scope, until in self.holder.until.items()
            if until - now >= cover
        }

    def _blocked(self, endpoint_id: Any, now: datetime) -> bool:
        until = self.blocked_until.get(endpoint_id)
        return until is not None and now < until

    def _take(self, endpoint_ids: set, *, now: datetime) -> bool:
        if not endpoint_ids or self.tick.lost is not None:
            return self.tick.lost is None
        try:
            self.holder.take({self._scope(e) for e in endpoint_ids}, now=now)
        except DatabaseError as exc:
            if self.tick.lose(exc):
                return False
            raise
        for endpoint_id in endpoint_ids:
            if self.holder.slots(self._scope(endpoint_id)):
                self.blocked_until.pop(endpoint_id, None)
            else:
                self.blocked_until[endpoint_id] = now + timedelta(seconds=BLOCKED_SECONDS)
        return True

    def _scope(self, endpoint_id: Any) -> str:
        scope = f"webhook:{endpoint_id}"
        self.endpoint_of[scope] = endpoint_id
        return scope
