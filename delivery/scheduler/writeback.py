"""How a claimed row's outcome reaches the database.

A claimed row may go out in pieces, one per lane that carries some of its channels (its
webhook in a row worker, its email in a Resend batch). The joiner (`Joiner`) gathers what
each piece brings back and, once every piece is known, plans the row's write-back
(`plan.plan_delivery`) and hands it to the buffer. A piece that broke (raised) costs the row
its write-back: it stays claimed until its lease expires. A row that may not start is given
back (`release`), and a row that crashed its worker dead-lettered (`without_crashed`),
through the buffer too.

The write-back buffer (`WriteBackBuffer`) holds the plans of finished rows at most
FLUSH_SECONDS (or until a claim's worth are ready); they go out together in one short fenced
transaction (`write_back`), so a burst costs a few commits rather than one per row, and
what was written is counted into the tick's summary.

`write_back` issues one fenced UPDATE per shape of change (finished rows too: they are kept,
completed), one bulk insert for the delivery log (attempts are written even for fenced-out
rows: the calls happened; a `skipped` record only when its row's write-back applied, since
the row that reclaimed it will skip those occurrences itself), one UPDATE disabling
endpoints that answered 410, and — only when a webhook attempt changed what its endpoint's
circuit knows — one locked read and one bulk update of those endpoints. No network I/O
happens here.
"""

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction

from dbqueue.fences import fenced_update_many
from dbtools.compiled import insert_rows
from delivery import circuits, hooks
from delivery.circuits import Signal, circuit_of
from delivery.copies import units, waiting_copies
from delivery.hooks import WriteBackOutcomes
from delivery.models import Delivery, Notification, WebhookEndpoint
from delivery.scheduler.context import FLUSH_SECONDS, Tick
from delivery.scheduler.database_thread import InlineDatabase, TickDatabase
from delivery.scheduler.deliver import Deferral, DeferralReason, RowDelivery
from delivery.scheduler.plan import (
    Bucket,
    RowPlan,
    is_crashed,
    plan_crashed,
    plan_delivery,
    plan_release,
)
from delivery.states import Move
from delivery.transports.base import DeliveryResult

logger = logging.getLogger("delivery.scheduler")


WriteBack = Callable[..., list[RowPlan]]  # write(plans, now=, circuit_failures=) -> fenced


class WriteBackBuffer:
    def __init__(
        self, tick: Tick, *, write: WriteBack, database: TickDatabase | None = None
    ) -> None:
        """`database`: where the write-backs run (database_thread.py; inline by default)."""
        self.tick, self.write = tick, write
        self.database = database or InlineDatabase()
        self.plans: list[RowPlan] = []
        self.since: datetime | None = None  # when the oldest of them finished
        # Write-backs running on the database thread, with their plans.
        self.writing: dict[Future, list[RowPlan]] = {}

    @property
    def futures(self) -> Collection[Future]:
        return self.writing.keys()

    def add(self, plan: RowPlan) -> None:
        if not self.plans:
            self.since = self.tick.clock.now()
        self.plans.append(plan)

    def wait(self) -> float | None:
        """Seconds until the plans are due for their write-back (None: none wait): at once
        when a claim's worth wait, else FLUSH_SECONDS after the oldest finished."""
        if self.since is None:
            return None
        if len(self.plans) >= self.tick.config.batch:
            return 0
        waited = (self.tick.clock.now() - self.since).total_seconds()
        return max(0.0, FLUSH_SECONDS - waited)

    def flush_releases(self) -> None:
        """Write back now, and wait until it is written, when rows given back unattempted
        wait here: a claim made before they are written would not see them, and could take
        the queue for drained."""
        if any(plan.bucket is Bucket.RELEASED for plan in self.plans):
            self.flush()
            self.written()

    def flush(self) -> None:
        """Write back every plan that waits (on the database thread: counted once written,
        `collect`). When the write fails (or the connection was lost before) the rows count
        as errors: they stay claimed until their leases expire."""
        plans, self.plans, self.since = self.plans, [], None
        if not plans:
            return
        tick = self.tick
        if tick.lost is not None:
            tick.summary.errors += len(plans)
            return
        writing = self.database.submit(
            self.write, plans, now=tick.clock.now(), circuit_failures=tick.config.circuit_failures
        )
        self.writing[writing] = plans
        if writing.done():
            self.collect({writing})

    def collect(self, done: Collection[Future]) -> None:
        """Count the write-backs among `done` that ended."""
        for writing in [future for future in done if future in self.writing]:
            self._written(self.writing.pop(writing), writing)

    def written(self) -> None:
        """Wait for every write-back running, and count them."""
        if self.writing:
            wait(self.writing)
            self.collect(set(self.writing))

    def _written(self, plans: list[RowPlan], writing: Future) -> None:
        tick = self.tick
        try:
            fenced = writing.result()
        except DatabaseError as exc:
            logger.error("write-back of %d rows failed: %s", len(plans), type(exc).__name__)
            tick.summary.errors += len(plans)
            tick.lose(exc)
            return
        self._count(plans, fenced)

    def _count(self, plans: Sequence[RowPlan], fenced: list[RowPlan]) -> None:
        summary = self.tick.summary
        summary.fenced_out += len(fenced)
        for plan in plans:
            bucket = plan.bucket.value
            setattr(summary, bucket, getattr(summary, bucket) + 1)
            summary.record(plan, applied=plan not in fenced)


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
        results = {u: join.results[u] for u in units(row) if u in join.results}
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


def without_crashed(
    rows: list[Notification], *, tick: Tick, buffer: WriteBackBuffer, now: datetime
) -> list[Notification]:
    """The claimed rows to start: a row whose earlier claims all died before writing back
    is dead-lettered instead."""
    policy = tick.config.policy
    fine = []
    for row in rows:
        if is_crashed(unfinished_claims=row.unfinished_claims, max_attempts=row.max_attempts):
            buffer.add(plan_crashed(row, token=row.claim_token, now=now, policy=policy))
        else:
            fine.append(row)
    return fine


def may_start(row: Notification, *, tick: Tick, buffer: WriteBackBuffer, now: datetime) -> bool:
    """Whether the row's delivery may start now: the tick is not stopping, its connection
    holds, and the row's lease still covers a delivery started now (its channel timeout,
    the grace and the write-back). Otherwise the row goes back unattempted (a later claim
    gives it a new lease) and False. Every lane asks this before a row starts."""
    assert row.claimed_until is not None  # the lease of the claim that took the row
    late = row.claimed_until - now < tick.config.start_cover
    if tick.stop.is_set() or tick.lost is not None or late:
        release(row, buffer=buffer)
        return False
    return True


def decisions_applied(rows: Sequence[Notification], *, tick: Tick, now: datetime) -> bool:
    """Apply what the products decide for the claimed rows (delivery.hooks.claimed: a
    digest's body, recipients' addresses, opt-outs, unsubscribe headers, a closed send
    window's wait); False when the connection was lost (the rows stay claimed until their
    leases expire)."""
    try:
        hooks.claimed(rows, now=now)
    except DatabaseError as exc:
        if not tick.lose(exc):
            raise
        return False
    return True


def quiet_hours(row: Notification) -> dict[str, Deferral]:
    """Each copy of the row's email whose recipient's send window is closed, deferred,
    unattempted, to its opening (by unit: delivery.copies)."""
    return {
        copy.unit: Deferral(until=copy.wait, reason=DeferralReason.QUIET_HOURS)
        for copy in waiting_copies(row)
        if copy.wait is not None
    }


def release(row: Notification, *, buffer: WriteBackBuffer) -> None:
    """Give the row back unattempted, its claim not counted against it."""
    buffer.add(plan_release(row, token=row.claim_token))


GONE_REASON = "endpoint answered 410 Gone"
CIRCUIT_FIELDS = [
    "consecutive_failures",
    "circuit_open_until",
    "circuit_interval_seconds",
    "last_failure_at",
    "failed_deliveries",
    "failing_since",
]


def write_back(
    plans: Sequence[RowPlan], *, now: datetime, circuit_failures: int | None = None
) -> list[RowPlan]:
    """Apply `plans` and return those that were fenced out (their row was reclaimed after
    our lease ran out, so their outcome was dropped). Each is logged as
    `fenced out on <move> for row <id>, claim_token=<t>`."""
    if not plans:
        return []
    with transaction.atomic():
        applied = fenced_update_many(Notification, [(p.pk, p.token, p.changes) for p in plans])
        logs = [log for plan in plans for log in plan.logs]
        logs += [p.skipped for p in plans if p.skipped is not None and p.pk in applied]
        if logs:
            insert_rows(Delivery, logs)
        gone = {p.gone_endpoint_id for p in plans if p.gone_endpoint_id is not None}
        if gone:
            WebhookEndpoint.objects.filter(pk__in=gone).update(
                enabled=False, disabled_reason=GONE_REASON, updated_at=now
            )
        dead = [p.pk for p in plans if p.move is Move.DEAD_LETTER and p.pk in applied]
        signals = [p.endpoint_signal for p in plans if p.endpoint_signal and p.pk in applied]
        retiring: list[WebhookEndpoint] = []
        if signals:
            threshold = circuit_failures or settings.WEBHOOK_CIRCUIT_FAILURES
            retiring = record_circuits(signals, now=now, threshold=threshold)
        hooks.written_back(WriteBackOutcomes(dead_lettered=dead, retiring=retiring), now=now)
    fenced = [p for p in plans if p.pk not in applied]
    for plan in fenced:
        logger.warning(
            "fenced out on %s for row %s, claim_token=%s", plan.move.value, plan.pk, plan.token
        )
    return fenced


def record_circuits(
    signals: Sequence[tuple[Any, circuits.Signal]], *, now: datetime, threshold: int
) -> list[WebhookEndpoint]:
    """Apply the attempts' signals to their endpoints' circuits as the database has them
    (locked, so ticks on several machines add up rather than overwrite each other), and
    answer the enabled endpoints that have failed long enough to retire. Only write-backs
    that were not fenced out count: a stale attempt says nothing."""
    endpoints = WebhookEndpoint.objects.select_for_update().in_bulk({e for e, _ in signals})
    for endpoint_id, signal in signals:
        endpoint = endpoints.get(endpoint_id)
        if endpoint is None:
            continue
        circuit = circuits.after(circuit_of(endpoint), signal, now=now, threshold=threshold)
        endpoint.consecutive_failures = circuit.consecutive_failures
        endpoint.circuit_open_until = circuit.open_until
        endpoint.circuit_interval_seconds = circuit.interval_seconds
        endpoint.last_failure_at = circuit.last_failure_at
        endpoint.failed_deliveries = circuit.failed_deliveries
        endpoint.failing_since = circuit.failing_since
    WebhookEndpoint.objects.bulk_update(list(endpoints.values()), CIRCUIT_FIELDS)
    after_hours = settings.ENDPOINT_DISABLE_AFTER_HOURS
    return [
        endpoint
        for endpoint in endpoints.values()
        if endpoint.enabled
        and circuits.retires(circuit_of(endpoint), now=now, after_hours=after_hours)
    ]
