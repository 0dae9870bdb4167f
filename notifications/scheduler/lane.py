"""The contract between the tick and its lanes, and the admission rules every lane applies
to the rows it claimed.

A lane is one kind of work: rows delivered one by one (`rowlane.RowLane`), emails sent in
paced batches (`batchlane.BatchLane`). Each owns its state, what and when it claims, its
work in flight and what it does when that work comes back; the tick only loops over them
(`Lane`). What a lane may ask of the tick is `Tick`: the clock, the budget, the summary and
the lost-connection rule."""

import logging
from collections.abc import Collection
from concurrent.futures import Future
from datetime import datetime
from typing import Protocol

from notifications.models import Notification
from notifications.scheduler.buffer import WriteBackBuffer
from notifications.scheduler.context import Tick
from notifications.scheduler.plan import is_poison, plan_poison, plan_release

logger = logging.getLogger("notifications.scheduler")


class Carrier(Protocol):
    """A lane that carries one channel of rows the row lane claimed."""

    def take(self, row: Notification) -> None: ...


class Lane(Protocol):
    """One kind of work, as the tick's loop sees it."""

    @property
    def futures(self) -> Collection[Future]:
        """The lane's work in flight, for the tick to wait on."""

    @property
    def drained(self) -> bool:
        """The lane's last claim found no more rows due for it."""

    def wants_claim(self) -> bool:
        """Whether the lane should claim now (it may also have found the tick's budget
        spent or its queue empty)."""

    def claim(self) -> None:
        """Claim a batch of due rows and start (or queue) them."""

    def collect(self, done: set[Future]) -> None:
        """Apply what came back of the lane's futures among `done`."""

    def send(self) -> None:
        """Start what the lane holds ready: rows other lanes handed it, rows that waited."""

    def pause(self) -> float | None:
        """Seconds before the lane may act again on its own (None: it does not wait)."""

    def close(self) -> None:
        """Give up the lane's threads (the tick is over)."""


def without_poison(
    rows: list[Notification], *, tick: Tick, buffer: WriteBackBuffer, now: datetime
) -> list[Notification]:
    """The claimed rows to start: a row whose earlier claims all died before writing back
    is dead-lettered instead."""
    policy = tick.config.policy
    fine = []
    for row in rows:
        if is_poison(unfinished_claims=row.unfinished_claims, max_attempts=row.max_attempts):
            buffer.add(plan_poison(row, token=row.claim_token, now=now, policy=policy))
        else:
            fine.append(row)
    return fine


def may_start(row: Notification, *, tick: Tick, buffer: WriteBackBuffer, now: datetime) -> bool:
    """Whether the row's delivery may start now: the tick is not stopping, its connection
    holds, and the row's lease still covers a delivery started now (its channel timeout,
    the grace and the write-back). Otherwise the row goes back unattempted (a later claim
    gives it a new lease) and False. Every lane asks this before a row starts."""
    late = row.claimed_until - now < tick.config.start_cover
    if tick.stop.is_set() or tick.lost is not None or late:
        release(row, buffer=buffer)
        return False
    return True


def release(row: Notification, *, buffer: WriteBackBuffer) -> None:
    """Give the row back unattempted, its claim not counted against it."""
    buffer.add(plan_release(row, token=row.claim_token))
