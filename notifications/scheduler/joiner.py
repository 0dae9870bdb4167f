"""The joiner: a claimed row may go out in pieces, one per lane that carries some of its
channels (its webhook in a row worker, its email in a Resend batch). The joiner gathers
what each piece brings back and, once every piece is known, plans the row's write-back and
hands it to the buffer. A piece that broke (raised) costs the row its write-back: it stays
claimed until its lease expires."""

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from notifications.circuits import Signal
from notifications.models import Notification
from notifications.scheduler.buffer import WriteBackBuffer
from notifications.scheduler.context import Tick
from notifications.scheduler.deliver import Deferral, RowDelivery
from notifications.scheduler.plan import plan_delivery
from notifications.transports.base import DeliveryResult

logger = logging.getLogger("notifications.scheduler")


@dataclass
class _Join:
    """A row out in pieces: what came back so far."""

    token: int
    pieces: int
    attempted_at: datetime
    deferred: dict[str, Deferral]
    # A row out in one piece was attempted when that piece went (a batch's send).
    alone: bool
    results: dict[str, DeliveryResult] = field(default_factory=dict)
    signal: tuple[Any, Signal] | None = None
    broken: bool = False


class Joiner:
    def __init__(self, tick: Tick, buffer: WriteBackBuffer) -> None:
        self.tick, self.buffer = tick, buffer
        self.joins: dict[Any, _Join] = {}

    def expect(
        self, row: Notification, *, pieces: int, at: datetime, deferred: Mapping[str, Deferral]
    ) -> None:
        """The row goes out in `pieces` (none: every channel of it was deferred, so it is
        planned at once), attempted `at`, with `deferred` channels not attempted."""
        if not pieces:
            delivery = RowDelivery(row, results={}, attempted_at=at, deferred=deferred)
            self._write(delivery, row.claim_token, None)
            return
        self.joins[row.pk] = _Join(
            token=row.claim_token,
            pieces=pieces,
            attempted_at=at,
            deferred=dict(deferred),
            alone=pieces == 1,
        )

    def settle(
        self,
        row: Notification,
        *,
        results: Mapping[str, DeliveryResult] | None = None,
        deferred: Mapping[str, Deferral] | None = None,
        signal: tuple[Any, Signal] | None = None,
        sent_at: datetime | None = None,
    ) -> None:
        """One piece came back with `results` and `deferred` channels (`signal`: its
        webhook attempt's news for the endpoint's circuit; `sent_at`: when it went)."""
        join = self.joins.get(row.pk)
        if join is None:  # given up (`forget`)
            return
        join.results.update(results or {})
        join.deferred.update(deferred or {})
        join.signal = signal or join.signal
        if sent_at is not None and join.alone:
            join.attempted_at = sent_at
        self._piece_done(row, join)

    def broke(self, row: Notification, exc: Exception) -> None:
        """One piece raised: an error; the row is not written back."""
        self._count_error(row, exc)
        join = self.joins.get(row.pk)
        if join is not None:
            join.broken = True
            self._piece_done(row, join)

    def forget(self, rows: Iterable[Notification]) -> None:
        """Give up the rows (the tick lost its connection): nothing of them is written."""
        for row in rows:
            self.joins.pop(row.pk, None)

    def _piece_done(self, row: Notification, join: _Join) -> None:
        join.pieces -= 1
        if join.pieces:
            return
        del self.joins[row.pk]
        if join.broken:
            return
        results = {c: join.results[c] for c in row.channels if c in join.results}
        delivery = RowDelivery(
            row, results=results, attempted_at=join.attempted_at, deferred=join.deferred
        )
        self._write(delivery, join.token, join.signal)

    def _write(self, delivery: RowDelivery, token: int, signal: tuple[Any, Signal] | None) -> None:
        tick = self.tick
        try:
            plan = plan_delivery(
                delivery,
                token=token,
                now=tick.clock.now(),
                policy=tick.config.policy,
                endpoint_signal=signal,
            )
        except Exception as exc:  # one bad row must not stop the tick
            self._count_error(delivery.notification, exc)
            return
        self.buffer.add(plan)

    def _count_error(self, row: Notification, exc: Exception) -> None:
        self.tick.summary.errors += 1
        logger.error(
            "row %s: unexpected %s while processing; it stays claimed until its lease expires",
            row.pk,
            type(exc).__name__,
        )
