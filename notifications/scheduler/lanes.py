"""The lanes one tick drives, in the order they claim: the row lane first, then a batch
lane for each channel sent in batches (email, with Resend configured). A new channel is a
sender of the row lane (deliver.py) or a lane of its own added here; the tick's loop does
not change."""

from collections.abc import Callable
from typing import Any

from dbqueue.claims import Claimed
from notifications.scheduler.batchlane import BatchLane
from notifications.scheduler.buffer import WriteBackBuffer
from notifications.scheduler.context import Tick
from notifications.scheduler.deliver import Senders
from notifications.scheduler.joiner import Joiner
from notifications.scheduler.lane import Lane
from notifications.scheduler.rowlane import RowLane


def build_lanes(
    tick: Tick,
    *,
    senders: Senders,
    buffer: WriteBackBuffer,
    claim: Callable[..., Claimed],
    executor: Callable[..., Any],
) -> list[Lane]:
    """The tick's lanes, sharing one joiner that writes rows back through `buffer`;
    `claim` claims due rows (notification_claim), `executor` makes their thread pools."""
    joiner = Joiner(tick, buffer)
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
    )
    return [rows, *batched]
