"""run_tick: claim due notifications a few at a time, deliver them through a bounded pool
of row workers, write their outcomes back in short fenced batches, and report a summary.

The main thread does all database work; row workers only call the channels. A row is
claimed only when a worker slot is free for it, so its lease starts when its work starts.
"""

import logging
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import ClassVar

from django.conf import settings
from django.db import DatabaseError

from dbqueue.claims import ClaimSpec, ClaimValue, claim
from dbqueue.clock import Clock
from dbqueue.database import connection_lost
from dbqueue.totals import WorkerSummary
from dbqueue.worker import ConnectionLost, Worker
from notifications.models import Notification, WebhookEndpoint
from notifications.scheduler import outcomes
from notifications.scheduler.deliver import Senders, default_senders, deliver_row
from notifications.scheduler.plan import Policy, RowPlan, plan_delivery, plan_poison
from notifications.scheduler.writeback import write_back

logger = logging.getLogger("notifications.scheduler")

DUE = ClaimSpec(
    ready=lambda now: Notification.objects.due(now=now),
    order_by=("next_fire_at",),
    fair_by="tenant",
    # Reset by every write-back, so it counts claims that died before producing an outcome.
    on_claim={"unfinished_claims": ClaimValue.INCREMENT},
)


def notification_claim(*, now: datetime, lease: timedelta, limit: int) -> list[Notification]:
    """Claim up to `limit` due rows (oldest first); each carries its new claim_token."""
    return claim(DUE, now=now, lease=lease, limit=limit)


@dataclass
class TickSummary(WorkerSummary):
    """What one tick did. Each claimed row is counted once: delivered, partial, failed
    (backing off), dead_lettered, or errors (its processing or its write-back batch raised;
    it stays claimed until its lease expires). fenced_out counts outcomes dropped because
    the row had been reclaimed meanwhile."""

    claimed: int = 0
    delivered: int = 0
    partial: int = 0
    failed: int = 0
    dead_lettered: int = 0
    fenced_out: int = 0
    errors: int = 0
    duration: float = 0.0

    worker: ClassVar[str] = "run_tick"


@dataclass(frozen=True)
class TickConfig:
    limit: int
    time_budget: float
    concurrency: int
    lease: timedelta
    channel_timeout: float
    policy: Policy = field(repr=False)

    @classmethod
    def from_settings(
        cls, *, limit: int | None, time_budget: float | None, concurrency: int | None
    ) -> "TickConfig":
        """Raises ValueError for a limit, budget or concurrency that is not positive."""
        config = cls(
            limit=settings.TICK_LIMIT if limit is None else limit,
            time_budget=settings.TICK_TIME_BUDGET_SECONDS if time_budget is None else time_budget,
            concurrency=settings.TICK_CONCURRENCY if concurrency is None else concurrency,
            lease=timedelta(seconds=settings.CLAIM_LEASE_SECONDS),
            channel_timeout=settings.CHANNEL_TIMEOUT_SECONDS,
            policy=Policy(
                max_attempts=settings.NOTIFICATION_MAX_ATTEMPTS, backoff=settings.BACKOFF_SECONDS
            ),
        )
        for name in ("limit", "time_budget", "concurrency"):
            if getattr(config, name) <= 0:
                raise ValueError(f"{name} must be greater than zero")
        return config


def run_tick(
    *,
    now: datetime | None = None,
    limit: int | None = None,
    time_budget: float | None = None,
    concurrency: int | None = None,
    senders: Senders | None = None,
    stop: threading.Event | None = None,
) -> TickSummary:
    """Run one tick. `now` fixes the clock (tests); None uses the one shared clock.
    Stops claiming after `time_budget` seconds, after `limit` rows, when nothing is due,
    or when `stop` is set; then finishes and writes back the rows in flight. Raises
    ConnectionLost when the database connection is lost: it then claims nothing more, lets
    the rows in flight finish and writes none of them back (counted as errors: they stay
    claimed until their leases expire)."""
    config = TickConfig.from_settings(limit=limit, time_budget=time_budget, concurrency=concurrency)
    tick = _Tick(config, Clock(now), senders or default_senders(), stop or threading.Event())
    summary = tick.run()
    summary.add_to_totals(now=tick.clock.now())
    return summary


class _Tick:
    def __init__(self, config: TickConfig, clock: Clock, senders: Senders, stop: threading.Event):
        self.config, self.clock, self.senders, self.stop = config, clock, senders, stop
        self.summary = TickSummary()
        self.in_flight: dict[Future, tuple[Notification, int]] = {}
        self.finished: list[RowPlan] = []
        self.exhausted = False
        self.endpoints: dict = {}
        self.lost: DatabaseError | None = None

    def run(self) -> TickSummary:
        rows = ThreadPoolExecutor(self.config.concurrency, thread_name_prefix="tick-row")
        # Two channels a row at most; a channel that overran its deadline may still hold
        # a thread, so the channel pool is not shared with the row workers.
        channels = ThreadPoolExecutor(2 * self.config.concurrency, "tick-channel")
        try:
            while True:
                if self._may_claim():
                    # New rows start first; finished ones are written back while they run.
                    self._claim(rows, channels)
                    self._flush()
                elif self.in_flight:
                    done, _ = wait(self.in_flight, return_when=FIRST_COMPLETED)
                    self._collect(done)
                else:
                    break
            self._flush()
        finally:
            rows.shutdown(wait=False, cancel_futures=True)
            channels.shutdown(wait=False, cancel_futures=True)
        self.summary.duration = self.clock.elapsed()
        if self.lost is not None:
            raise ConnectionLost(self.summary) from self.lost
        return self.summary

    def _may_claim(self) -> bool:
        free = self.config.concurrency - len(self.in_flight)
        return (
            not self.exhausted
            and self.lost is None
            and not self.stop.is_set()
            and self.summary.claimed < self.config.limit
            and self.clock.elapsed() < self.config.time_budget
            # Claim in batches (fewer statements), yet only for slots that are free now.
            and (free * 2 >= self.config.concurrency or not self.in_flight)
        )

    def _claim(self, rows: ThreadPoolExecutor, channels: ThreadPoolExecutor) -> None:
        free = self.config.concurrency - len(self.in_flight)
        wanted = min(free, self.config.limit - self.summary.claimed)
        now = self.clock.now()
        try:
            claimed = notification_claim(now=now, lease=self.config.lease, limit=wanted)
        except DatabaseError as exc:
            if self._lose(exc):
                return
            raise
        self.exhausted = len(claimed) < wanted
        self.summary.claimed += len(claimed)
        try:
            endpoints = self._endpoints({row.webhook_endpoint_id for row in claimed} - {None})
        except DatabaseError as exc:
            if self._lose(exc):
                self.summary.errors += len(claimed)
                return
            raise
        for row in claimed:
            poison = outcomes.is_poison(
                unfinished_claims=row.unfinished_claims,
                max_attempts=self.config.policy.max_attempts,
            )
            if poison:
                self._record(plan_poison(row, token=row.claim_token, now=now))
                continue
            future = rows.submit(
                deliver_row,
                row,
                endpoint=endpoints.get(row.webhook_endpoint_id),
                now=self.clock.now(),
                senders=self.senders,
                pool=channels,
                timeout=self.config.channel_timeout,
            )
            self.in_flight[future] = (row, row.claim_token)

    def _lose(self, exc: DatabaseError) -> bool:
        """Whether `exc` cost the tick its connection; from then on it claims and writes
        nothing (reconnecting could claim rows it might never write back)."""
        if self.lost is None and connection_lost(exc):
            self.lost = exc
        return self.lost is not None

    def _endpoints(self, ids: set) -> dict:
        """The claimed rows' endpoints: one query for those this tick has not loaded yet."""
        missing = ids - self.endpoints.keys()
        if missing:
            self.endpoints.update(WebhookEndpoint.objects.in_bulk(missing))
        return self.endpoints

    def _collect(self, done: set[Future]) -> None:
        for future in done:
            row, token = self.in_flight.pop(future)
            try:
                plan = plan_delivery(
                    future.result(), token=token, now=self.clock.now(), policy=self.config.policy
                )
            except Exception as exc:  # one bad row must not stop the tick
                self.summary.errors += 1
                logger.error(
                    "row %s: unexpected %s while processing; it stays claimed until its "
                    "lease expires",
                    row.pk,
                    type(exc).__name__,
                )
                continue
            self._record(plan)

    def _record(self, plan: RowPlan) -> None:
        self.finished.append(plan)
        # Reload a disabled (410) endpoint from the database for later rows.
        self.endpoints.pop(plan.gone_endpoint_id, None)

    def _flush(self) -> None:
        batch, self.finished = self.finished, []
        if not batch:
            return
        if self.lost is not None:
            self.summary.errors += len(batch)
            return
        try:
            fenced = write_back(batch, now=self.clock.now())
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


def tick_worker(
    *,
    limit: int | None,
    interval: float,
    report: Callable[[str], None],
    report_error: Callable[[str], None],
) -> Worker:
    """The run_tick worker: each pass is one tick."""

    def tick(stop: threading.Event) -> TickSummary:
        return run_tick(limit=limit, stop=stop)

    return Worker("run_tick", tick, interval=interval, report=report, report_error=report_error)
