"""What a tick is to its lanes: what they may ask of it (Tick), what it is told (TickConfig)
and what it reports (TickSummary), with the lateness its summary measures and the due rows
it leaves behind when it stops before the queue is empty."""

import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import ClassVar, Protocol

from django.conf import settings
from django.db import DatabaseError

from dbqueue.clock import Clock
from dbqueue.totals import Histogram, WorkerSummary
from delivery.models import Notification
from delivery.scheduler.plan import Policy, RowPlan

# What the lease must cover after a row's channel timeout: the channel's grace (at most 1 s)
# and the write-back of its outcome (within FLUSH_SECONDS), with room to spare. Below the
# 5 s by which CLAIM_LEASE_SECONDS must exceed CHANNEL_TIMEOUT_SECONDS, so a row claimed
# with the shortest lease allowed may still start within 3 s of its claim.
START_MARGIN_SECONDS = 2.0
# Finished rows are written back within this many seconds (in batches: fewer commits).
FLUSH_SECONDS = 0.5
# The lateness bands, in seconds: the one definition used by /metrics' histogram buckets,
# the admin's queue-health figures and the TickworkDeliveriesLate alert, whose threshold is
# one of them (operations/monitoring/prometheus/alerts.yml). On time first (a tick a minute
# starts up to 60 s after a row is due), then the ranges that tell "a slow tick" from
# "falling behind" from "stalled". Lateness past the last band reads as the last band, as
# in Prometheus.
LATENESS_BOUNDS_S = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


def lateness_histogram() -> Histogram:
    """The `lateness` histogram of channel attempts (counters `lateness_le_<s>`, …)."""
    return Histogram(name="lateness", bounds=LATENESS_BOUNDS_S)


@dataclass
class TickSummary(WorkerSummary):
    """What one tick did. Each claimed row is counted once: delivered, partial, backed_off
    (a failed attempt, retried later), deferred (some channel waits, unattempted, for its
    endpoint), released (given back unattempted: its endpoint had no free slot),
    dead_lettered, suppressed (finished without a send: every channel was suppressed by
    a recipient's preference), or errors (its processing or its write-back batch raised; it stays
    claimed until its lease expires).
    fenced_out counts outcomes dropped because the row had been reclaimed meanwhile.
    skipped counts the occurrences late recurring rows jumped over; late_max_s is the
    largest lateness among the channel attempts (delivered or not) and `lateness` their
    histogram; due_left, a gauge, the due rows left behind when the tick stopped for
    another reason than an empty queue."""

    claimed: int = 0
    delivered: int = 0
    partial: int = 0
    backed_off: int = 0
    deferred: int = 0
    released: int = 0
    dead_lettered: int = 0
    suppressed: int = 0
    fenced_out: int = 0
    errors: int = 0
    skipped: int = 0
    due_left: int = 0
    late_max_s: float = 0.0
    duration: float = 0.0
    lateness: Histogram = field(default_factory=lateness_histogram, repr=False)

    worker: ClassVar[str] = "run_tick"
    gauges: ClassVar[frozenset[str]] = frozenset({"due_left"})

    def record(self, plan: RowPlan, *, applied: bool) -> None:
        """Count a written-back plan's lateness, and its skipped occurrences if `applied`
        (a fenced-out row skips nothing: the tick that reclaimed it decides)."""
        for log in plan.logs:
            if log.late_ms is not None:
                self.lateness.observe(log.late_ms)
                self.late_max_s = max(self.late_max_s, log.late_ms / 1000)
        if applied and plan.skipped is not None:
            self.skipped += plan.skipped.skipped_count

    def histogram_totals(self) -> dict[str, int]:
        return self.lateness.totals()


MAIL_LOOKAHEAD_SECONDS = 15.0


@dataclass(frozen=True)
class TickConfig:
    """`batch`: rows per claim (TICK_LIMIT); `max_rows`: an optional cap on the tick
    (TICK_MAX_ROWS, None = drain until nothing is due or the budget is spent)."""

    batch: int
    max_rows: int | None
    time_budget: float
    concurrency: int
    lease: timedelta
    channel_timeout: float
    endpoint_concurrency: int
    circuit_failures: int
    policy: Policy = field(repr=False)
    # Resend requests per second, shared by every tick process (RESEND_RATE_LIMIT).
    mail_rate: float = 2.0

    @classmethod
    def from_settings(
        cls, *, max_rows: int | None, time_budget: float | None, concurrency: int | None
    ) -> "TickConfig":
        """Raises ValueError for a cap, budget or concurrency that is not positive."""
        config = cls(
            batch=settings.TICK_LIMIT,
            max_rows=settings.TICK_MAX_ROWS if max_rows is None else max_rows,
            time_budget=settings.TICK_TIME_BUDGET_SECONDS if time_budget is None else time_budget,
            concurrency=settings.TICK_CONCURRENCY if concurrency is None else concurrency,
            lease=timedelta(seconds=settings.CLAIM_LEASE_SECONDS),
            channel_timeout=settings.CHANNEL_TIMEOUT_SECONDS,
            endpoint_concurrency=settings.WEBHOOK_ENDPOINT_CONCURRENCY,
            circuit_failures=settings.WEBHOOK_CIRCUIT_FAILURES,
            mail_rate=settings.RESEND_RATE_LIMIT,
            policy=Policy(
                backoff=settings.BACKOFF_SECONDS,
                max_defer_seconds=settings.BACKPRESSURE_MAX_DEFER_SECONDS,
                recurrence_budget_ms=settings.RECURRENCE_BUDGET_MS,
            ),
        )
        for name in ("time_budget", "concurrency"):
            if getattr(config, name) <= 0:
                raise ValueError(f"{name} must be greater than zero")
        if config.max_rows is not None and config.max_rows <= 0:
            raise ValueError("max_rows must be greater than zero")
        return config

    @property
    def mail_horizon(self) -> float:
        """How far ahead (seconds) an email batch may be claimed for its send slot: far
        enough that a tick's last claims keep the provider busy past its time budget (a
        10,000-email burst needs 50 s at 2 requests/s), near enough that an email due during
        a burst waits at most this long behind it; and its rows' lease must still cover the
        send itself (one channel timeout) and a margin."""
        return min(MAIL_LOOKAHEAD_SECONDS, self.mail_lease_margin)

    @property
    def mail_lease_margin(self) -> float:
        """How long after its claim an email batch may still go: its rows' lease must cover
        the send (one channel timeout) and a margin. Defaults: 45 - 10 - 5 = 30 s."""
        return self.lease.total_seconds() - self.channel_timeout - 5

    @property
    def waiting_depth(self) -> int:
        """How many rows may wait for one endpoint's slots while its pace is unknown: whole
        waves of its slots, as many as the lease covers on top of the row's own delivery
        (each wave one channel timeout, plus a margin), two at most. Defaults: 10 s
        timeouts, a 45 s lease → 2 waves of 4 = 8 rows."""
        waves = int((self.lease.total_seconds() - 5) // self.channel_timeout) - 1
        return self.endpoint_concurrency * max(0, min(2, waves))

    @property
    def endpoint_share(self) -> int:
        """The most rows of one endpoint a claim takes while the tick knows nothing of it:
        what it can hold waiting (or, when nothing may wait, what it can start)."""
        return self.waiting_depth or self.endpoint_concurrency

    @property
    def wait_window(self) -> float:
        """Seconds a row may wait for its endpoint's slots once the endpoint's pace is
        known: the lease less the row's own delivery and a 5 s margin (30 s by default)."""
        return self.lease.total_seconds() - self.channel_timeout - 5

    @cached_property  # asked before every delivery
    def start_cover(self) -> timedelta:
        """The lease a row must still have when its delivery starts: its channel timeout,
        the channel's grace and the write-back (START_MARGIN_SECONDS)."""
        return timedelta(seconds=self.channel_timeout + START_MARGIN_SECONDS)


class Tick(Protocol):
    """What a lane may ask of the tick that drives it."""

    config: TickConfig
    clock: Clock
    stop: threading.Event
    summary: TickSummary
    lost: DatabaseError | None

    def may_claim(self) -> bool:
        """No cap reached, no stop asked, time left, the connection not lost."""

    def claim_room(self, wanted: int) -> int:
        """`wanted`, or fewer if the tick's cap on claimed rows leaves less."""

    def lose(self, exc: DatabaseError) -> bool:
        """Whether `exc` cost the tick its connection (from then on nothing is written)."""


def due_rows_left(*, now: datetime) -> int:
    """Rows that are due at `now` and not claimed: what a tick that stopped on its time
    budget or row cap left for the next one. One COUNT over the due index's range; call it
    only then (a tick that stopped because nothing was due left 0)."""
    return Notification.objects.due(now=now).count()
