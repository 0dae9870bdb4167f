"""The lanes one tick drives, and the contract between the tick and them.

A lane is one kind of work: rows delivered one by one (`rowlane.RowLane`), emails sent in
paced batches (`batchlane.BatchLane`). Each owns its state, what and when it claims, its
work in flight and what it does when that work comes back; the tick only loops over them
(`Lane`), in the order they claim: the row lane first, then a batch lane for each channel
sent in batches (email, with Resend configured). What a lane may ask of the tick is
`context.Tick`: the clock, the budget, the summary and the lost-connection rule. A new
channel is a sender of the row lane (deliver.py) or a lane of its own added here; the tick's
loop does not change."""

from collections.abc import Callable, Collection
from concurrent.futures import Future
from typing import Any, Protocol

from dbqueue.claims import Claimed
from delivery.scheduler.batchlane import BatchLane
from delivery.scheduler.context import Tick
from delivery.scheduler.database_thread import TickDatabase
from delivery.scheduler.deliver import Senders
from delivery.scheduler.mail import TenantPace
from delivery.scheduler.rowlane import RowLane
from delivery.scheduler.sending_process import SendingProcess
from delivery.scheduler.writeback import Joiner, WriteBackBuffer


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

    def rows_became_due(self) -> None:
        """Rows were committed due now since the lane's last claim: claim again, even if
        that claim found the queue drained."""

    def collect(self, done: set[Future]) -> None:
        """Apply what came back of the lane's futures among `done`."""

    def send(self) -> None:
        """Start what the lane holds ready: rows other lanes handed it, rows that waited."""

    def pause(self) -> float | None:
        """Seconds before the lane may act again on its own (None: it does not wait)."""

    def close(self) -> None:
        """Give up the lane's threads (the tick is over)."""


def build_lanes(
    tick: Tick,
    *,
    senders: Senders,
    buffer: WriteBackBuffer,
    claim: Callable[..., Claimed],
    executor: Callable[..., Any],
    database: TickDatabase | None = None,
    sending: Callable[[], SendingProcess | None] | None = None,
) -> list[Lane]:
    """The tick's lanes, sharing one joiner that writes rows back through `buffer`;
    `claim` claims due rows (notification_claim), `executor` makes their thread pools,
    `database` runs the row lane's claims (database_thread.py; inline by default),
    `sending` starts the row lane's sending process (sending_process.py; None: none)."""
    joiner = Joiner(tick, buffer)
    pace = TenantPace()
    batched = []
    if senders.email_batch is not None:
        batched.append(
            BatchLane(
                tick,
                sender=senders.email_batch,
                joiner=joiner,
                buffer=buffer,
                claim=claim,
                executor=executor,
                pace=pace,
            )
        )
    leave = None
    for lane in batched:
        leave = lane.claims if leave is None else leave | lane.claims
    rows = RowLane(
        tick,
        senders=senders,
        joiner=joiner,
        buffer=buffer,
        claim=claim,
        executor=executor,
        carriers={lane.channel: lane for lane in batched},
        leave=leave,
        pace=pace,
        database=database,
        sending=sending,
    )
    return [rows, *batched]
