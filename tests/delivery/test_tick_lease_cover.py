"""A fast endpoint's burst is claimed in batches that wait for its slots, so the guarantee
that a row's lease covers its own work is kept when the row starts: a row whose lease no
longer covers a delivery goes back unattempted, and is delivered once, later, on a new
lease. The tick's clock is moved by the channels here: each delivery takes one second."""

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from delivery.models import Delivery, DeliveryOutcome, Notification
from delivery.scheduler import tick as tick_module
from delivery.scheduler.context import START_MARGIN_SECONDS
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
from delivery.transports.base import DeliveryResult
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
URL = "https://hooks.example.com/hook"


class SteppingClock:
    """The tick's clock, moved only by the channels (`step` per delivery)."""

    moves = True

    def __init__(self, at: datetime) -> None:
        self.at = at
        self._started = time.monotonic()

    def now(self) -> datetime:
        return self.at

    def elapsed(self) -> float:
        return time.monotonic() - self._started


class Channels:
    """A fast endpoint by its own account (5 ms a call) on a clock that moves 1 s a call;
    records each call's occurrence and the lease its row had left when it went out."""

    def __init__(self, clock: SteppingClock, *, step: timedelta = timedelta(seconds=1)) -> None:
        self.clock, self.step = clock, step
        self.leases: dict = {}  # row pk -> claimed_until, as the latest claim returned it
        self.calls: Counter = Counter()
        self.lease_left: list[float] = []
        self.stop_after_first: threading.Event | None = None
        self._lock = threading.Lock()

    def webhook(self, message, *, timeout):
        pk = message.msg_id.split("_")[1]
        with self._lock:
            self.calls[message.msg_id] += 1
            self.lease_left.append((self.leases[pk] - self.clock.at).total_seconds())
            self.clock.at += self.step
        if self.stop_after_first is not None:
            self.stop_after_first.set()
        return DeliveryResult(ok=True, http_status=200, duration_ms=5)

    def email(self, message, *, timeout):
        raise AssertionError("no email here")

    @property
    def senders(self) -> Senders:
        return Senders(email=self.email, webhook=self.webhook)


@pytest.fixture
def clock(monkeypatch) -> SteppingClock:
    stepping = SteppingClock(NOW)
    monkeypatch.setattr(tick_module, "Clock", lambda now=None: stepping)
    return stepping


@pytest.fixture
def channels(clock, monkeypatch) -> Channels:
    recorder = Channels(clock)
    real_claim = tick_module.notification_claim

    def claim(**options):
        claimed = real_claim(**options)
        recorder.leases.update((str(row.pk), row.claimed_until) for row in claimed)
        return claimed

    monkeypatch.setattr(tick_module, "notification_claim", claim)
    return recorder


@pytest.fixture
def one_slot(settings) -> None:
    # One delivery at a time, so each row starts exactly when the one before it ended.
    settings.WEBHOOK_ENDPOINT_CONCURRENCY = 1
    settings.CLAIM_LEASE_SECONDS = 45
    settings.CHANNEL_TIMEOUT_SECONDS = 10


def test_rows_whose_lease_no_longer_covers_a_delivery_go_back_and_come_again(
    db, one_slot, channels
):
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url=URL)
    rows = make_notifications(60, tenant=tenant, endpoint=endpoint, next_fire_at=NOW)

    summary = run_tick(now=NOW, concurrency=1, senders=channels.senders)

    # One claim took the burst's rows at once; those that could not start within their
    # lease (45 s, a delivery 1 s) went back unattempted and were claimed again.
    assert summary.released > 0
    assert (summary.delivered, summary.claimed) == (60, 60 + summary.released)
    # No call went out on a lease shorter than the channel timeout and the margin ...
    assert min(channels.lease_left) >= 10 + START_MARGIN_SECONDS
    # ... and every occurrence was called exactly once.
    assert channels.calls == {f"notification_{row.pk}_1": 1 for row in rows}
    assert set(Notification.objects.values_list("state", "next_fire_at")) == {("completed", None)}
    outcomes = Counter(Delivery.objects.values_list("outcome", flat=True))
    assert outcomes == {DeliveryOutcome.DELIVERED: 60}


def test_finished_rows_are_written_back_while_a_long_queue_drains(
    db, one_slot, channels, monkeypatch
):
    waited: list[float] = []
    real_write_back = tick_module.write_back

    def timed_write_back(plans, *, now, **options):
        for plan in plans:
            waited.extend((now - log.attempted_at).total_seconds() for log in plan.logs)
        return real_write_back(plans, now=now, **options)

    monkeypatch.setattr(tick_module, "write_back", timed_write_back)
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url=URL)
    make_notifications(20, tenant=tenant, endpoint=endpoint, next_fire_at=NOW)

    summary = run_tick(now=NOW, concurrency=1, senders=channels.senders)

    assert (summary.delivered, summary.released) == (20, 0)
    # No claim came after the second one (it took every row), yet no row waited for the
    # end of the tick (about 20 s): each was written back at the first look at the buffer
    # FLUSH_SECONDS after it finished. A delivery takes 1 s of this clock, and the row
    # started after it may finish (moving the clock on) before the tick looks again: so
    # at most two more deliveries' time passes from its start (3 s).
    assert len(waited) == 20
    assert max(waited) <= 3


def test_a_stopping_tick_starts_no_waiting_row(db, one_slot, channels):
    stop = threading.Event()
    channels.stop_after_first = stop
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url=URL)
    make_notifications(5, tenant=tenant, endpoint=endpoint, next_fire_at=NOW, rrule="FREQ=DAILY")

    summary = run_tick(now=NOW, concurrency=2, senders=channels.senders, stop=stop)

    # One slot: the first row went out, the rows claimed to wait for the slot went back
    # unattempted once the tick was told to stop.
    assert sum(channels.calls.values()) == summary.delivered == 1
    assert summary.released == summary.claimed - 1 >= 1
    released = Notification.objects.filter(claim_token=1, occurrence=1)
    assert released.count() == summary.released
    for row in released:
        assert (row.claimed_until, row.unfinished_claims, row.error_count) == (None, 0, 0)
    assert not Delivery.objects.filter(notification_id__in=released.values("pk")).exists()


class CountingPool(ThreadPoolExecutor):
    """The tick's pools; for the row workers' pool, the most rows ever handed to it at
    once (submitted, not finished): more than its workers would queue inside it."""

    most = 0

    def submit(self, fn, /, *args, **kwargs):
        future = super().submit(fn, *args, **kwargs)
        if self._thread_name_prefix == "tick-row":
            self.futures = [f for f in getattr(self, "futures", []) if not f.done()]
            self.futures.append(future)
            CountingPool.most = max(CountingPool.most, len(self.futures))
        return future


def test_rows_beyond_the_free_workers_wait_for_one(db, settings, monkeypatch):
    settings.WEBHOOK_ENDPOINT_CONCURRENCY = 2
    monkeypatch.setattr(CountingPool, "most", 0)
    monkeypatch.setattr(tick_module, "ThreadPoolExecutor", CountingPool)
    calls = Counter()

    def send(message, *, timeout):
        calls[getattr(message, "msg_id", None) or message.idempotency_key] += 1
        time.sleep(0.002)  # long enough for rows to pile up behind the workers
        return DeliveryResult(ok=True, http_status=200, duration_ms=5)

    emails_per_claim: list[int] = []
    real_claim = tick_module.notification_claim

    def claim(**options):
        claimed = real_claim(**options)
        emails_per_claim.append(sum(1 for row in claimed if row.webhook_endpoint_id is None))
        return claimed

    monkeypatch.setattr(tick_module, "notification_claim", claim)
    noisy, mailer = make_tenant("noisy"), make_tenant("mailer")
    endpoint = make_endpoint(tenant=noisy, url=URL)
    make_notifications(100, tenant=noisy, endpoint=endpoint, next_fire_at=NOW)
    make_notifications(
        40, tenant=mailer, channels=("email",), email_to=("a@example.com",), next_fire_at=NOW
    )

    summary = run_tick(now=NOW, concurrency=4, senders=Senders(email=send, webhook=send))

    # A claim for the endpoint's queue brought more email rows than there are workers ...
    assert max(emails_per_claim) > 4
    # ... and they waited for a worker in the tick, not in the pool's queue; none released.
    assert CountingPool.most <= 4
    assert (summary.delivered, summary.released) == (140, 0)
    assert len(calls) == 140 and set(calls.values()) == {1}
