"""run_tick: claim due notifications a batch at a time, deliver them through a bounded pool
of row workers, write their outcomes back in short fenced batches, and report a summary.

A tick drains: it claims until nothing is due, its time budget is spent or its optional cap
is reached. The main thread does all database work; row workers only call the channels. A
row is claimed when a worker slot is free for it, or a place in the queue of a webhook
endpoint that answers fast enough to start it well within its lease; a row whose lease no
longer covers its delivery when its turn comes goes back unattempted. Each webhook endpoint
gets at most a few slots (`EndpointGate`), and its circuit breaker defers its rows while it
is down, so a dead receiver costs nobody else anything.

With Resend configured, emails go out in batches of up to 100, paced by a send budget that
every tick process shares: rows whose only pending channel is email are claimed a batch at
a time, and only while the budget has a slot within the horizon their leases cover, so the
rest stay due, unclaimed. A row with a webhook and an email is claimed for its webhook; its
email joins the next batch and the row is written back once both are known.
"""

import dataclasses
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError
from django.db.models import Q

from dbqueue.claims import ClaimSpec, ClaimValue, claim
from dbqueue.clock import Clock
from dbqueue.database import connection_lost
from dbqueue.worker import ConnectionLost, Worker
from notifications.models import Channel, Notification, WebhookEndpoint
from notifications.scheduler import outcomes
from notifications.scheduler.breaker import circuit_of
from notifications.scheduler.deliver import (
    Deferral,
    RowDelivery,
    Senders,
    default_senders,
    deliver_row,
    pending_channels,
)
from notifications.scheduler.gate import Admission, EndpointGate
from notifications.scheduler.lateness import due_rows_left
from notifications.scheduler.mail import (
    Holdoff,
    OutgoingBatch,
    compose,
    first_free_slot,
    hold,
    send_when_due,
    take_slots,
)
from notifications.scheduler.outcomes import DeferralReason
from notifications.scheduler.plan import RowPlan, plan_delivery, plan_poison, plan_release
from notifications.scheduler.summary import FLUSH_SECONDS, TickConfig, TickSummary
from notifications.scheduler.writeback import write_back
from notifications.transports.base import DeliveryResult
from notifications.transports.resend import BATCH_LIMIT, BatchAnswer
from outbound.categories import ErrorCategory

logger = logging.getLogger("notifications.scheduler")

DUE = ClaimSpec(
    ready=lambda now: Notification.objects.due(now=now),
    order_by=("next_fire_at",),
    fair_by="tenant",
    # Reset by every write-back, so it counts claims that died before producing an outcome.
    on_claim={"unfinished_claims": ClaimValue.INCREMENT},
    capped_by="webhook_endpoint",
)
# Rows with nothing but an email left to send: email is their only channel, or their webhook
# is settled. (Stated positively: a negated JSON path lookup is NULL, not true, where the
# path is missing.)
EMAIL_ONLY = Q(channels=[Channel.EMAIL]) | Q(channel_state__has_key=Channel.WEBHOOK)
# Batches sleeping until their slot or being sent; each holds a mailer thread.
MAILERS = 8
MAX_BATCHES_IN_FLIGHT = 64


def notification_claim(
    *,
    now: datetime,
    lease: timedelta,
    limit: int,
    skip_endpoints: Iterable[Any] = (),
    per_endpoint: int | None = None,
    endpoint_caps: Mapping[Any, int] | None = None,
    only: Q | None = None,
) -> list[Notification]:
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
) -> TickSummary:
    """Run one tick. `now` fixes the clock (tests); None uses the one shared clock.
    Claims in batches until nothing is due, `time_budget` seconds passed, `max_rows` rows
    were claimed (default TICK_MAX_ROWS, None = no cap) or `stop` is set; then finishes and
    writes back the rows in flight. Raises ConnectionLost when the database connection is
    lost: it then claims nothing more, lets the rows in flight finish and writes none of
    them back (counted as errors: they stay claimed until their leases expire)."""
    config = TickConfig.from_settings(
        max_rows=max_rows, time_budget=time_budget, concurrency=concurrency
    )
    tick = _Tick(config, Clock(now), senders or default_senders(), stop or threading.Event())
    summary = tick.run()
    summary.add_to_totals(now=tick.clock.now())
    return summary


@dataclasses.dataclass
class _Join:
    """A row whose channels went out in pieces (its webhook in a row worker, its email in a
    batch): what came back so far. It is planned once `pieces` reaches zero."""

    token: int
    pieces: int
    attempted_at: datetime
    results: dict[str, DeliveryResult] = dataclasses.field(default_factory=dict)
    deferred: dict[str, Deferral] = dataclasses.field(default_factory=dict)
    email_only: bool = False
    signal: Any = None
    broken: bool = False


class _Tick:
    def __init__(self, config: TickConfig, clock: Clock, senders: Senders, stop: threading.Event):
        self.config, self.clock, self.senders, self.stop = config, clock, senders, stop
        self.summary = TickSummary()
        # future -> (row, its claim token, the endpoint whose slot it holds or None)
        self.in_flight: dict[Future, tuple[Notification, int, Any]] = {}
        self.finished: list[RowPlan] = []
        self.finished_at: datetime | None = None  # when the oldest of them finished
        # Rows waiting for a free worker (a claim may bring more than there are).
        self.queued: deque[Notification] = deque()
        self.exhausted = False
        # Rows of busy endpoints were left for later (not claimed, or released), so coming
        # up short did not mean nothing is due: claim again once one of their slots frees.
        self.left_for_later = False
        self.endpoints: dict = {}
        self.gate = EndpointGate(
            capacity=config.endpoint_concurrency,
            threshold=config.circuit_failures,
            depth=config.waiting_depth,
            most=config.batch,
            window=config.wait_window,
            share=config.endpoint_share,
        )
        self.lost: DatabaseError | None = None
        # Email in Resend batches (README, "The scheduler"): rows whose email waits for a batch, the
        # rows out in pieces, the batches on their way, and when the shared send budget may
        # next have a slot within the horizon.
        self.batching = senders.email_batch is not None
        self.mail_rows: list[Notification] = []
        self.joins: dict[Any, _Join] = {}
        self.mail_in_flight: dict[Future, OutgoingBatch] = {}
        self.mail_exhausted = not self.batching
        self.mail_resume_at = 0.0
        self.budget_seen = False
        self.mail_stalled = False
        self.holdoff = Holdoff()

    def run(self) -> TickSummary:
        self.rows = ThreadPoolExecutor(self.config.concurrency, thread_name_prefix="tick-row")
        # Two channels a row at most; a channel that overran its deadline may still hold
        # a thread, so the channel pool is not shared with the row workers.
        self.channels = ThreadPoolExecutor(2 * self.config.concurrency, "tick-channel")
        self.mailer = ThreadPoolExecutor(MAILERS, "tick-mail")
        try:
            while True:
                claimed = False
                if self._may_claim():
                    # New rows start first; finished ones are written back while they run.
                    self._claim()
                    claimed = True
                if self._may_claim_mail():
                    self._claim_mail()
                    claimed = True
                if claimed:
                    self._dispatch_mail()
                    self._flush()
                elif self.in_flight or self.mail_in_flight:
                    futures = [*self.in_flight, *self.mail_in_flight]
                    done, _ = wait(futures, timeout=self._pause(), return_when=FIRST_COMPLETED)
                    self._collect(done)
                    self._dispatch_mail()
                    if self._flush_wait() == 0:
                        self._flush()
                elif (pause := self._mail_pause()) is not None:
                    self.stop.wait(pause)
                else:
                    break
            self._flush()
            self._count_left_behind()
        finally:
            self.rows.shutdown(wait=False, cancel_futures=True)
            self.channels.shutdown(wait=False, cancel_futures=True)
            self.mailer.shutdown(wait=False, cancel_futures=True)
        self.summary.duration = self.clock.elapsed()
        if self.lost is not None:
            raise ConnectionLost(self.summary) from self.lost
        return self.summary

    def _count_left_behind(self) -> None:
        """When the tick stopped on its budget, its cap or a stop request rather than on an
        empty queue, record how many due rows it left (one COUNT); `--loop` then ticks again
        at once, and /metrics shows whether the scheduler keeps up."""
        drained = self.exhausted and self.mail_exhausted and not self.mail_stalled
        if drained or self.lost is not None:
            return
        try:
            self.summary.due_left = due_rows_left(now=self.clock.now())
        except DatabaseError as exc:
            if not self._lose(exc):
                raise

    def _free_slots(self) -> int:
        return self.config.concurrency - len(self.in_flight) - len(self.queued)

    def _pause(self) -> float | None:
        """How long the tick may wait for a delivery to finish before it has to act."""
        pauses = [p for p in (self._flush_wait(), self._mail_pause()) if p is not None]
        return min(pauses, default=None)

    def _flush_wait(self) -> float | None:
        """Seconds until the finished rows are due for their write-back (None: none wait):
        at once when a batch is full, else FLUSH_SECONDS after the oldest finished."""
        if self.finished_at is None:
            return None
        if len(self.finished) >= self.config.batch:
            return 0
        waited = (self.clock.now() - self.finished_at).total_seconds()
        return max(0.0, FLUSH_SECONDS - waited)

    def _may_claim_any(self) -> bool:
        capped = self.config.max_rows is not None and self.summary.claimed >= self.config.max_rows
        return (
            not capped
            and self.lost is None
            and not self.stop.is_set()
            and self.clock.elapsed() < self.config.time_budget
        )

    def _may_claim(self) -> bool:
        free = self._free_slots()
        return (
            not self.exhausted
            and self._may_claim_any()
            # Claim in batches (fewer statements), yet only for slots that are free now, or
            # for the queue of a fast endpoint that runs low.
            and (
                (free > 0 and (free * 2 >= self.config.concurrency or not self.in_flight))
                or self.gate.refills(now=self.clock.now()) > 0
            )
        )

    def _may_claim_mail(self) -> bool:
        """An email batch may be claimed: some may be due, and the send budget has a slot
        within the horizon the rows' leases cover."""
        if self.mail_exhausted or not self._may_claim_any():
            return False
        if not self.budget_seen:
            self._look_at_send_budget()
        paused = self._mail_pause() is not None  # may find the wait outlasts the budget
        return (
            not paused
            and not self.mail_exhausted
            and len(self.mail_in_flight) < MAX_BATCHES_IN_FLIGHT
        )

    def _mail_pause(self) -> float | None:
        """Seconds until the send budget may have a slot within the horizon again, while
        emails may still be due and claimed this tick; None when nothing waits for it or
        the wait would outlast the tick's time budget (the rows stay due, unclaimed)."""
        if self.mail_exhausted or not self._may_claim_any():
            return None
        pause = self.mail_resume_at - time.monotonic()
        if pause <= 0:
            return None
        if pause >= self.config.time_budget - self.clock.elapsed():
            # No email claim this tick; the rows are left due, not drained.
            self.mail_exhausted = self.mail_stalled = True
            return None
        return pause

    def _look_at_send_budget(self) -> None:
        """Before the first email claim: leave the email rows due, unclaimed, while other
        processes hold the budget's slots beyond the horizon."""
        self.budget_seen = True
        now = self.clock.now()
        try:
            first_free = first_free_slot()
        except DatabaseError as exc:
            if self._lose(exc):
                return
            raise
        if first_free is not None:
            ahead = (first_free - now).total_seconds() - self.config.mail_horizon
            self.mail_resume_at = time.monotonic() + ahead

    def _claim(self) -> None:
        now = self.clock.now()
        # No more of one endpoint's rows than it can start or hold waiting; rows that wait
        # for an endpoint with rows left need no free worker.
        limits = self.gate.claim_limits(now=now)
        wanted = min(max(self._free_slots(), 0) + limits.extra, self.config.batch)
        if self.config.max_rows is not None:
            wanted = min(wanted, self.config.max_rows - self.summary.claimed)
        try:
            claimed = notification_claim(
                now=now,
                lease=self.config.lease,
                limit=wanted,
                skip_endpoints=limits.skip,
                per_endpoint=self.config.endpoint_share,
                endpoint_caps=limits.caps,
                # Rows with nothing but an email to send are claimed a batch at a time.
                only=~EMAIL_ONLY if self.batching else None,
            )
        except DatabaseError as exc:
            if self._lose(exc):
                return
            raise
        per_endpoint = Counter(row.webhook_endpoint_id for row in claimed)
        per_endpoint.pop(None, None)
        # A claim that took an endpoint's full share may have left more of its rows due.
        self.exhausted = len(claimed) < wanted
        capped = self.gate.claimed(per_endpoint, limits, full=not self.exhausted)
        self.left_for_later = bool(limits.skip or capped)
        self.summary.claimed += len(claimed)
        try:
            self._load_endpoints({row.webhook_endpoint_id for row in claimed} - {None})
        except DatabaseError as exc:
            if self._lose(exc):
                self.summary.errors += len(claimed)
                return
            raise
        self._start_claimed(claimed, now=now)
        # Short of rows, yet an endpoint that took its full share can take more at once
        # (its rows were deferred, say): claim again rather than wait for its deliveries.
        if any(self.gate.wants_more(endpoint_id, now=now) for endpoint_id in capped):
            self.exhausted = False

    def _start_claimed(self, claimed: list[Notification], *, now: datetime) -> None:
        for row in claimed:
            poison = outcomes.is_poison(
                unfinished_claims=row.unfinished_claims, max_attempts=row.max_attempts
            )
            if poison:
                self._record(
                    plan_poison(row, token=row.claim_token, now=now, policy=self.config.policy)
                )
                continue
            self._start(row)

    def _claim_mail(self) -> None:
        """Claim one batch of rows whose only pending channel is email."""
        wanted = min(self.config.batch, BATCH_LIMIT)
        if self.config.max_rows is not None:
            wanted = min(wanted, self.config.max_rows - self.summary.claimed)
        now = self.clock.now()
        try:
            claimed = notification_claim(
                now=now, lease=self.config.lease, limit=wanted, only=EMAIL_ONLY
            )
        except DatabaseError as exc:
            if self._lose(exc):
                return
            raise
        self.mail_exhausted = len(claimed) < wanted
        self.summary.claimed += len(claimed)
        self._start_claimed(claimed, now=now)

    def _start(self, row: Notification) -> None:
        """Send the row's pending channels, or defer, hold or release it as its webhook
        endpoint's gate says."""
        now = self.clock.now()
        late = row.claimed_until - now < self.config.start_cover
        if self.stop.is_set() or self.lost is not None or late:
            # Stopping, or its lease no longer covers a delivery started now: it goes back
            # unattempted (a later claim gives it a new lease).
            self._record(plan_release(row, token=row.claim_token))
            self.left_for_later = True
            return
        endpoint = self._webhook_endpoint(row)
        deferred: dict[str, Deferral] = {}
        if endpoint is not None:
            admission = self.gate.admit(endpoint.pk, now=now)
            if admission is Admission.WAIT:
                self.gate.wait(endpoint.pk, row)
                return
            if admission is Admission.RELEASE:
                self._record(plan_release(row, token=row.claim_token))
                self.left_for_later = True
                return
            if admission is Admission.DEFER:
                until = self.gate.circuit(endpoint.pk).open_until
                deferred[Channel.WEBHOOK] = Deferral(
                    until=until, reason=DeferralReason.CIRCUIT_OPEN
                )
                endpoint = None
        pending = pending_channels(row)
        batched = self.batching and Channel.EMAIL in pending and Channel.EMAIL not in deferred
        others = [c for c in pending if c not in deferred and not (batched and c == Channel.EMAIL)]
        if not others and (batched or deferred):
            if batched:
                self._join_mail(row, others=False, deferred=deferred, now=now)
            else:
                delivery = RowDelivery(row, results={}, attempted_at=now, deferred=deferred)
                self._record(self._plan(delivery, row.claim_token))
            return
        if len(self.in_flight) >= self.config.concurrency:
            self.queued.append(row)  # admitted again when a worker is free
            return
        if batched:
            self._join_mail(row, others=True, deferred=deferred, now=now)
        if endpoint is not None:
            self.gate.started(endpoint.pk)
        future = self.rows.submit(
            deliver_row,
            row,
            endpoint=self.endpoints.get(row.webhook_endpoint_id),
            now=now,
            senders=self.senders,
            pool=self.channels,
            timeout=self.config.channel_timeout,
            deferred=deferred,
            elsewhere=frozenset({Channel.EMAIL}) if batched else frozenset(),
        )
        self.in_flight[future] = (row, row.claim_token, endpoint.pk if endpoint else None)

    def _join_mail(
        self, row: Notification, *, others: bool, deferred: dict[str, Deferral], now: datetime
    ) -> None:
        """The row's email waits for the next batch; with `others`, its other channels go
        out in a row worker and the row is planned once both pieces are back."""
        self.mail_rows.append(row)
        self.joins[row.pk] = _Join(
            token=row.claim_token,
            pieces=1 + others,
            email_only=not others,
            attempted_at=now,
            deferred=dict(deferred),
        )

    def _webhook_endpoint(self, row: Notification) -> WebhookEndpoint | None:
        """The endpoint whose slot the row's webhook would take (None when it sends no
        webhook now, or the endpoint cannot be called anyway)."""
        if Channel.WEBHOOK not in pending_channels(row):
            return None
        endpoint = self.endpoints.get(row.webhook_endpoint_id)
        return endpoint if endpoint is not None and endpoint.enabled else None

    def _lose(self, exc: DatabaseError) -> bool:
        """Whether `exc` cost the tick its connection; from then on it claims and writes
        nothing (reconnecting could claim rows it might never write back)."""
        if self.lost is None and connection_lost(exc):
            self.lost = exc
        return self.lost is not None

    def _load_endpoints(self, ids: set) -> None:
        """The claimed rows' endpoints: one query for those this tick has not loaded yet;
        their circuits as the database has them."""
        missing = ids - self.endpoints.keys()
        if not missing:
            return
        loaded = WebhookEndpoint.objects.in_bulk(missing)
        self.endpoints.update(loaded)
        for endpoint in loaded.values():
            self.gate.know(endpoint.pk, circuit_of(endpoint))

    def _collect(self, done: set[Future]) -> None:
        for future in done:
            if future in self.mail_in_flight:
                self._mail_answered(self.mail_in_flight.pop(future), future)
                continue
            row, token, endpoint_id = self.in_flight.pop(future)
            try:
                delivery = future.result()
            except Exception as exc:  # one bad row must not stop the tick
                self._row_broke(row, exc)
                delivery = None
            signal = None
            if endpoint_id is not None:
                signal = self._endpoint_done(endpoint_id, delivery)
                # Claim again once an endpoint whose rows were left can take more: not on
                # every delivery (each claim ranks every due row), but when its queue runs low.
                if self.left_for_later and self.gate.wants_more(endpoint_id, now=self.clock.now()):
                    self.exhausted = False
            join = self.joins.get(row.pk)
            if join is not None:
                join.broken |= delivery is None
                if delivery is not None:
                    join.results.update(delivery.results)
                    join.deferred.update(delivery.deferred)
                join.signal = signal
                self._piece_done(row)
            elif delivery is not None:
                self._plan_and_record(delivery, token, signal)
        while self.queued and len(self.in_flight) < self.config.concurrency:
            self._start(self.queued.popleft())

    def _row_broke(self, row: Notification, exc: Exception) -> None:
        self.summary.errors += 1
        logger.error(
            "row %s: unexpected %s while processing; it stays claimed until its lease expires",
            row.pk,
            type(exc).__name__,
        )

    def _plan_and_record(self, delivery: RowDelivery, token: int, signal: Any) -> None:
        row = delivery.notification
        try:
            plan = self._plan(delivery, token)
        except Exception as exc:  # one bad row must not stop the tick
            self._row_broke(row, exc)
            return
        plan.endpoint_signal = signal
        self._record(plan)

    def _piece_done(self, row: Notification) -> None:
        """One piece of a row out in pieces came back; plan the row when it was the last."""
        join = self.joins[row.pk]
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
        self._plan_and_record(delivery, join.token, join.signal)

    def _email_done(
        self,
        row: Notification,
        *,
        result: DeliveryResult | None = None,
        deferral: Deferral | None = None,
        sent_at: datetime | None = None,
    ) -> None:
        join = self.joins[row.pk]
        if result is not None:
            join.results[Channel.EMAIL] = result
        if deferral is not None:
            join.deferred[Channel.EMAIL] = deferral
        if sent_at is not None and join.email_only:
            # An email-only row was attempted when its batch went, not when it was claimed.
            join.attempted_at = sent_at
        self._piece_done(row)

    def _dispatch_mail(self) -> None:
        """Put the emails that wait into batches: recorded, each with a send slot of the
        shared budget, handed to a mailer thread that sends it when its slot comes. A batch
        whose slot lies beyond the horizon (other processes took the budget) is not sent:
        its emails are deferred, unattempted, to that slot."""
        if not self.mail_rows or self.lost is not None:
            return
        rows, self.mail_rows = self.mail_rows, []
        now = self.clock.now()
        try:
            batches = compose(rows, now=now)
            if batches:
                take_slots(batches, rate=self.config.mail_rate, now=now)
        except DatabaseError as exc:
            if not self._lose(exc):
                raise
            self.summary.errors += len(rows)
            for row in rows:
                self.joins.pop(row.pk, None)
            return
        self._mail_left_out(rows, batches, now=now)
        horizon = now + timedelta(seconds=self.config.mail_horizon)
        for batch in batches:
            if batch.slot > horizon:
                for row, _token, _index in batch.members:
                    deferral = Deferral(until=batch.slot, reason=DeferralReason.SEND_BUDGET)
                    self._email_done(row, deferral=deferral)
                continue
            future = self.mailer.submit(
                send_when_due,
                batch,
                send_at=time.monotonic() + (batch.slot - now).total_seconds(),
                latest=time.monotonic() + self.config.mail_lease_margin,
                sender=self.senders.email_batch,
                timeout=self.config.channel_timeout,
                holdoff=self.holdoff,
                stop=self.stop,
                clock=self.clock.now,
            )
            self.mail_in_flight[future] = batch
        if batches:
            self._pause_mail_until(max(b.slot for b in batches), now=now)

    def _mail_left_out(
        self, rows: list[Notification], batches: list[OutgoingBatch], *, now: datetime
    ) -> None:
        """Rows that no batch took were reclaimed by another tick meanwhile (fenced out):
        this tick sends nothing for them; their write-back will be fenced out too."""
        taken = {row.pk for batch in batches for row, _, _ in batch.members}
        for row in rows:
            if row.pk not in taken:
                self._email_done(
                    row, deferral=Deferral(until=now, reason=DeferralReason.SEND_BUDGET)
                )

    def _pause_mail_until(self, last_slot: datetime, *, now: datetime) -> None:
        """No email claim until the budget's next slot (after `last_slot`) is within the
        horizon again."""
        next_slot = last_slot + timedelta(seconds=1 / self.config.mail_rate)
        ahead = (next_slot - now).total_seconds() - self.config.mail_horizon
        self.mail_resume_at = max(self.mail_resume_at, time.monotonic() + ahead)

    def _mail_answered(self, batch: OutgoingBatch, future: Future) -> None:
        """Apply a batch's answer to the rows it carried, and any hold-off the provider
        asked for to the shared budget."""
        try:
            answer: BatchAnswer | None = future.result()
        except Exception as exc:  # send_when_due does not raise; this guards the tick
            for row, _, _ in batch.members:
                self.joins[row.pk].broken = True
                self._row_broke(row, exc)
                self._piece_done(row)
            return
        now = self.clock.now()
        if answer is None:  # not sent: the tick stopped, or the slot came too late
            for row, _, _ in batch.members:
                self._email_done(
                    row, deferral=Deferral(until=now, reason=DeferralReason.SEND_BUDGET)
                )
        else:
            if answer.hold_seconds:
                self._hold_mail(answer.hold_seconds, now=now)
            for row, _, index in batch.members:
                self._email_done(row, result=answer.results[index], sent_at=batch.sent_at)
        self._flush()

    def _hold_mail(self, seconds: float, *, now: datetime) -> None:
        self.holdoff.extend(seconds)
        self.mail_resume_at = max(self.mail_resume_at, time.monotonic() + seconds)
        try:
            hold(seconds=seconds, now=now)
        except DatabaseError as exc:
            if not self._lose(exc):
                raise

    def _endpoint_done(self, endpoint_id: Any, delivery: RowDelivery | None) -> Any:
        """Free the endpoint's slot, apply the attempt to its circuit, start who waited;
        the attempt's news for the circuit, if any, for the row's write-back."""
        result = delivery.results.get(Channel.WEBHOOK) if delivery is not None else None
        now = self.clock.now()
        signal = self.gate.finish(
            endpoint_id,
            ok=result is not None and result.ok,
            category=result.category if result is not None else ErrorCategory.INTERNAL,
            now=now,
            backpressure=result is not None and result.backpressure,
            seconds=result.duration_ms / 1000 if result is not None else None,
        )
        while (row := self.gate.next_waiting(endpoint_id, now=now)) is not None:
            self._start(row)
        return (endpoint_id, signal) if signal is not None else None

    def _plan(self, delivery: RowDelivery, token: int) -> RowPlan:
        return plan_delivery(delivery, token=token, now=self.clock.now(), policy=self.config.policy)

    def _record(self, plan: RowPlan) -> None:
        if not self.finished:
            self.finished_at = self.clock.now()
        self.finished.append(plan)
        # Reload a disabled (410) endpoint from the database for later rows.
        self.endpoints.pop(plan.gone_endpoint_id, None)

    def _flush(self) -> None:
        batch, self.finished, self.finished_at = self.finished, [], None
        if not batch:
            return
        if self.lost is not None:
            self.summary.errors += len(batch)
            return
        try:
            fenced = write_back(
                batch, now=self.clock.now(), circuit_failures=self.config.circuit_failures
            )
        except DatabaseError as exc:
            # The rows stay claimed and become claimable again when their leases expire.
            logger.error("write-back of %d rows failed: %s", len(batch), type(exc).__name__)
            self.summary.errors += len(batch)
            self._lose(exc)
            return
        self.summary.fenced_out += len(fenced)
        for plan in batch:
            bucket = plan.bucket.value
            setattr(self.summary, bucket, getattr(self.summary, bucket) + 1)
            self.summary.record(plan, applied=plan not in fenced)


def tick_worker(
    *,
    max_rows: int | None,
    interval: float,
    report: Callable[[str], None],
    report_error: Callable[[str], None],
) -> Worker:
    """The run_tick worker: each pass is one tick."""

    def tick(stop: threading.Event) -> TickSummary:
        return run_tick(max_rows=max_rows, stop=stop)

    return Worker(
        "run_tick",
        tick,
        interval=interval,
        report=report,
        report_error=report_error,
        again=lambda summary: summary.due_left > 0,
    )
