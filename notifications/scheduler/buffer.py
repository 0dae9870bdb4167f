"""The write-back buffer: plans of finished rows wait here at most FLUSH_SECONDS (or until a
claim's worth are ready) and go out together in one short fenced transaction, so a burst
costs a few commits rather than one per row. What was written is counted into the tick's
summary."""

import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from django.db import DatabaseError

from notifications.scheduler.context import FLUSH_SECONDS, Tick
from notifications.scheduler.plan import Bucket, RowPlan

logger = logging.getLogger("notifications.scheduler")

WriteBack = Callable[..., list[RowPlan]]  # write(plans, now=, circuit_failures=) -> fenced


class WriteBackBuffer:
    def __init__(self, tick: Tick, *, write: WriteBack) -> None:
        self.tick, self.write = tick, write
        self.plans: list[RowPlan] = []
        self.since: datetime | None = None  # when the oldest of them finished

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
        """Write back now when rows given back unattempted wait here: a claim made before
        they are written would not see them, and could take the queue for drained."""
        if any(plan.bucket is Bucket.RELEASED for plan in self.plans):
            self.flush()

    def flush(self) -> None:
        """Write back every plan that waits. When the write fails (or the connection was
        lost before) the rows count as errors: they stay claimed until their leases expire."""
        plans, self.plans, self.since = self.plans, [], None
        if not plans:
            return
        tick = self.tick
        if tick.lost is not None:
            tick.summary.errors += len(plans)
            return
        try:
            fenced = self.write(
                plans, now=tick.clock.now(), circuit_failures=tick.config.circuit_failures
            )
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
