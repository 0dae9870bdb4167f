"""The batch lane: emails sent in Resend batches of up to 100, paced by a send budget that
every tick process shares (mail.py). Rows whose only pending channel is email are claimed
here a batch at a time, and only while the budget has a slot within the horizon their
leases cover, so the rest stay due, unclaimed. The row lane hands over the email of a row
that also has a webhook (`take`); every email waits for the next batch."""

import time
from collections.abc import Callable, Collection
from concurrent.futures import Future
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError
from django.db.models import Q

from dbqueue.claims import Claimed
from delivery.copies import copies_of, email_ready
from delivery.models import Channel, Notification
from delivery.scheduler.context import Tick
from delivery.scheduler.deliver import Deferral, DeferralReason
from delivery.scheduler.mail import (
    Holdoff,
    OutgoingBatch,
    TenantPace,
    compose,
    first_free_slot,
    hold,
    send_when_due,
    take_slots,
)
from delivery.scheduler.writeback import (
    Joiner,
    WriteBackBuffer,
    decisions_applied,
    may_start,
    quiet_hours,
    without_crashed,
)
from delivery.transports.email import NO_RECIPIENTS
from delivery.transports.resend import BATCH_LIMIT, BatchAnswer

# Rows with nothing but an email left to send: email is their only channel, or their webhook
# is settled. (Stated positively: a negated JSON path lookup is NULL, not true, where the
# path is missing.)
EMAIL_ONLY = Q(channels=[Channel.EMAIL]) | Q(channel_state__has_key=Channel.WEBHOOK)
# Batches sleeping until their slot or being sent; each holds a mailer thread.
MAILERS = 8
MAX_BATCHES_IN_FLIGHT = 64


class BatchLane:
    channel = Channel.EMAIL
    # The rows this lane claims (and the row lane leaves).
    claims = EMAIL_ONLY

    def __init__(
        self,
        tick: Tick,
        *,
        sender: Callable[..., BatchAnswer],
        joiner: Joiner,
        buffer: WriteBackBuffer,
        claim: Callable[..., Claimed],
        executor: Callable[..., Any],
        pace: TenantPace | None = None,
    ) -> None:
        self.tick, self.sender, self.joiner, self.buffer = tick, sender, joiner, buffer
        self.pace = pace or TenantPace()
        self.notification_claim = claim
        self.waiting: list[Notification] = []  # emails waiting for a batch
        self.in_flight: dict[Future, OutgoingBatch] = {}
        self.exhausted = False
        # The budget's next slot lies beyond the tick's time: email rows are left due.
        self.stalled = False
        self.budget = SendBudget(tick)
        self.mailer = executor(MAILERS, "tick-mail")

    @property
    def futures(self) -> Collection[Future]:
        return self.in_flight.keys()

    @property
    def drained(self) -> bool:
        return self.exhausted and not self.stalled

    def close(self) -> None:
        self.mailer.shutdown(wait=False, cancel_futures=True)

    def take(self, row: Notification) -> None:
        self.waiting.append(row)

    def rows_became_due(self) -> None:
        # A stalled lane's budget has no slot this tick: the new rows wait for the next.
        if not self.stalled:
            self.exhausted = False

    def wants_claim(self) -> bool:
        """An email batch may be claimed: some may be due, and the send budget has a slot
        within the horizon the rows' leases cover."""
        if self.exhausted or not self.tick.may_claim():
            return False
        if not self.budget.seen:
            self.budget.look()
        paused = self.pause() is not None  # may find the wait outlasts the budget
        return not paused and not self.exhausted and len(self.in_flight) < MAX_BATCHES_IN_FLIGHT

    def pause(self) -> float | None:
        """Seconds until the send budget may have a slot within the horizon again, while
        emails may still be due and claimed this tick; None when nothing waits for it or
        the wait would outlast the tick's time budget (the rows stay due, unclaimed)."""
        tick = self.tick
        if self.exhausted or not tick.may_claim():
            return None
        pause = self.budget.wait()
        if pause <= 0:
            return None
        if pause >= tick.config.time_budget - tick.clock.elapsed():
            # No email claim this tick; the rows are left due, not drained.
            self.exhausted = self.stalled = True
            return None
        return pause

    def claim(self) -> None:
        """Claim one batch of rows whose only pending channel is email."""
        self.buffer.flush_releases()
        tick, now = self.tick, self.tick.clock.now()
        wanted = tick.claim_room(min(tick.config.batch, BATCH_LIMIT))
        try:
            claimed = self.notification_claim(
                now=now, lease=tick.config.lease, limit=wanted, only=self.claims
            )
        except DatabaseError as exc:
            if tick.lose(exc):
                return
            raise
        self.exhausted = len(claimed) < wanted and claimed.drained
        tick.summary.claimed += len(claimed)
        if not decisions_applied(claimed, tick=tick, now=now):
            tick.summary.errors += len(claimed)
            return
        for row in without_crashed(claimed, tick=tick, buffer=self.buffer, now=now):
            if not may_start(row, tick=tick, buffer=self.buffer, now=now):
                continue
            # Copies whose recipient's send window is closed wait, unattempted.
            waiting = quiet_hours(row)
            if not email_ready(row, waiting):
                self.joiner.expect(row, pieces=0, at=now, deferred=waiting)
                continue
            self.joiner.expect(row, pieces=1, at=now, deferred=waiting)
            paced = self.pace.wait(row, now=now)
            if paced is not None:
                deferral = Deferral(until=paced, reason=DeferralReason.PLAN_RATE)
                self.joiner.settle(row, deferred={Channel.EMAIL: deferral})
            elif not copies_of(row):
                self.joiner.settle(row, results={Channel.EMAIL: NO_RECIPIENTS})
            else:
                self.take(row)

    def send(self) -> None:
        """Put the emails that wait into batches: recorded, each with a send slot of the
        shared budget, handed to a mailer thread that sends it when its slot comes. A batch
        whose slot lies beyond the horizon (other processes took the budget) is not sent:
        its emails are deferred, unattempted, to that slot."""
        if not self.waiting or self.tick.lost is not None:
            return
        rows, self.waiting = self.waiting, []
        now = self.tick.clock.now()
        batches = self._compose(rows, now=now)
        if batches is None:
            return
        self._left_out(rows, batches, now=now)
        horizon = now + timedelta(seconds=self.tick.config.mail_horizon)
        for batch in batches:
            slot = batch.taken_slot()
            if slot > horizon:
                for member in batch.members:
                    deferral = Deferral(until=slot, reason=DeferralReason.SEND_BUDGET)
                    self.joiner.settle(member.row, deferred={Channel.EMAIL: deferral})
            else:
                self._submit(batch, now=now)
        if batches:
            self.budget.pause_until(max(b.taken_slot() for b in batches), now=now)

    def _compose(self, rows: list[Notification], *, now: datetime) -> list[OutgoingBatch] | None:
        """The rows' batches, recorded and with their slots; None when the connection was
        lost (the rows count as errors and are given up)."""
        try:
            batches = compose(rows, now=now)
            if batches:
                take_slots(batches, rate=self.tick.config.mail_rate, now=now)
        except DatabaseError as exc:
            if not self.tick.lose(exc):
                raise
            self.tick.summary.errors += len(rows)
            self.joiner.forget(rows)
            return None
        return batches

    def _submit(self, batch: OutgoingBatch, *, now: datetime) -> None:
        config = self.tick.config
        future = self.mailer.submit(
            send_when_due,
            batch,
            send_at=time.monotonic() + (batch.taken_slot() - now).total_seconds(),
            latest=time.monotonic() + config.mail_lease_margin,
            sender=self.sender,
            timeout=config.channel_timeout,
            holdoff=self.budget.holdoff,
            stop=self.tick.stop,
            clock=self.tick.clock.now,
        )
        self.in_flight[future] = batch

    def _left_out(
        self, rows: list[Notification], batches: list[OutgoingBatch], *, now: datetime
    ) -> None:
        """Rows that no batch took were reclaimed by another tick meanwhile (fenced out):
        this tick sends nothing for them; their write-back will be fenced out too."""
        taken = {member.row.pk for batch in batches for member in batch.members}
        for row in rows:
            if row.pk not in taken:
                self._not_sent(row, now=now)

    def _not_sent(self, row: Notification, *, now: datetime) -> None:
        self.joiner.settle(
            row, deferred={Channel.EMAIL: Deferral(until=now, reason=DeferralReason.SEND_BUDGET)}
        )

    def collect(self, done: set[Future]) -> None:
        for future in done & self.in_flight.keys():
            self._answered(self.in_flight.pop(future), future)

    def _answered(self, batch: OutgoingBatch, future: Future) -> None:
        """Apply a batch's answer to the rows it carried, and any hold-off the provider
        asked for to the shared budget."""
        try:
            answer: BatchAnswer | None = future.result()
        except Exception as exc:  # send_when_due does not raise; this guards the tick
            for member in batch.members:
                self.joiner.broke(member.row, exc)
            return
        now = self.tick.clock.now()
        if answer is None:  # not sent: the tick stopped, or the slot came too late
            for member in batch.members:
                self._not_sent(member.row, now=now)
        else:
            if answer.hold_seconds:
                self.budget.hold(answer.hold_seconds, now=now)
            for member in batch.members:
                # A copy the resent batch does not hold goes on the next claim.
                later = Deferral(until=now, reason=DeferralReason.SEND_BUDGET)
                self.joiner.settle(
                    member.row,
                    results={unit: answer.results[i] for unit, i in member.indexes.items()},
                    deferred=dict.fromkeys(member.later, later),
                    sent_at=batch.sent_at,
                )
        self.buffer.flush()


class SendBudget:
    """This tick's view of the send budget every tick process shares (mail.py): when it may
    next have a slot within the horizon the email rows' leases cover, and the hold-off the
    provider asked for."""

    def __init__(self, tick: Tick) -> None:
        self.tick = tick
        # When (monotonic) the shared budget may next have a slot within the horizon.
        self.resume_at = 0.0
        self.seen = False
        self.holdoff = Holdoff()

    def wait(self) -> float:
        """Seconds until the budget may have a slot within the horizon (0 or less: now)."""
        return self.resume_at - time.monotonic()

    def look(self) -> None:
        """Before the first email claim: leave the email rows due, unclaimed, while other
        processes hold the budget's slots beyond the horizon."""
        self.seen = True
        now = self.tick.clock.now()
        try:
            first_free = first_free_slot()
        except DatabaseError as exc:
            if self.tick.lose(exc):
                return
            raise
        if first_free is not None:
            ahead = (first_free - now).total_seconds() - self.tick.config.mail_horizon
            self.resume_at = time.monotonic() + ahead

    def pause_until(self, last_slot: datetime, *, now: datetime) -> None:
        """No email claim until the budget's next slot (after `last_slot`) is within the
        horizon again."""
        config = self.tick.config
        next_slot = last_slot + timedelta(seconds=1 / config.mail_rate)
        ahead = (next_slot - now).total_seconds() - config.mail_horizon
        self.resume_at = max(self.resume_at, time.monotonic() + ahead)

    def hold(self, seconds: float, *, now: datetime) -> None:
        self.holdoff.extend(seconds)
        self.resume_at = max(self.resume_at, time.monotonic() + seconds)
        try:
            hold(seconds=seconds, now=now)
        except DatabaseError as exc:
            if not self.tick.lose(exc):
                raise
