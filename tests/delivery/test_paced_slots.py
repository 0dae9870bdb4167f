"""A backlog of paced rows (an endpoint's `rate_limit`, a plan's `deliveries_per_second`)
does not thrash: each waiting row reserves the slot it will get, and is claimed about once
and deferred at most once; the claims take no more of an endpoint's rows than its slots
within the lease. The clock is the test's: it moves only when the tick waits for it."""

import threading
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from dbqueue import pacing
from dbqueue.clock import Clock
from delivery.models import Delivery, DeliveryOutcome, Notification, NotificationState
from delivery.scheduler import tick as tick_module
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
from delivery.transports.base import DeliveryResult
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant
from tests.tenancy.plans_support import put_on_plan

pytestmark = pytest.mark.django_db

NOW = datetime(2031, 5, 5, 9, 0, tzinfo=UTC)
URL = "https://hooks.example.com/in"
RATE = 2
ROWS = 300


class SteppedClock(Clock):
    """A clock that moves only when the tick waits on it (`Stepping.wait`)."""

    def __init__(self, now: datetime) -> None:
        super().__init__(now)
        self.at = now

    def now(self) -> datetime:
        return self.at

    @property
    def moves(self) -> bool:
        return True


class Stepping(threading.Event):
    """The tick's stop event: a pause of the tick moves the clock on instead of sleeping."""

    def __init__(self, clock: SteppedClock) -> None:
        super().__init__()
        self.clock = clock

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is not None:
            self.clock.at += timedelta(seconds=timeout)
        return self.is_set()


def recording_senders(sent: list[datetime], clock: SteppedClock | None = None) -> Senders:
    def send(message, *, timeout):
        sent.append(clock.now() if clock is not None else NOW)
        return DeliveryResult(ok=True, http_status=200)

    return Senders(email=send, webhook=send)


@pytest.fixture
def claims(monkeypatch) -> list[int]:
    """How many rows each claim of the row lane took."""
    taken: list[int] = []
    claim = tick_module.notification_claim

    def counted(**kwargs):
        claimed = claim(**kwargs)
        taken.append(len(claimed))
        return claimed

    monkeypatch.setattr(tick_module, "notification_claim", counted)
    return taken


def _drain_on_a_stepped_clock(sent: list[datetime]) -> SteppedClock:
    clock = SteppedClock(NOW)
    run_tick(clock=clock, stop=Stepping(clock), senders=recording_senders(sent, clock))
    return clock


def _paced_backlog(*, rate_limit: int | None = None, plan_rate: int | None = None):
    tenant = make_tenant("paced")
    if plan_rate is not None:
        put_on_plan(tenant, deliveries_per_second=plan_rate)
    endpoint = make_endpoint(tenant=tenant, url=URL)
    if rate_limit is not None:
        endpoint.rate_limit = rate_limit
        endpoint.save()
    make_notifications(ROWS, tenant=tenant, endpoint=endpoint, next_fire_at=NOW, due_at=NOW)
    return tenant


def _assert_paced_once(sent: list[datetime], claims: list[int]) -> None:
    assert len(sent) == ROWS
    assert not Notification.objects.exclude(state=NotificationState.COMPLETED).exists()
    # Each row claimed once, none deferred: the rows waited here for the slots they hold.
    assert sum(claims) == ROWS
    assert not Delivery.objects.filter(outcome=DeliveryOutcome.DEFERRED).exists()
    # A claim took no more rows than the rate allows within the lease (the 30 s a row may
    # wait for its slot by default: 61 slots at 2 a second).
    assert max(claims) <= RATE * 30 + 1
    # The rate held, and was used: 300 slots half a second apart.
    per_second = Counter(int((at - NOW).total_seconds()) for at in sent)
    assert max(per_second.values()) <= RATE
    assert sent[-1] - sent[0] == timedelta(seconds=(ROWS - 1) / RATE)


def test_a_rate_limited_backlog_is_claimed_once_a_row_and_goes_at_the_rate(claims):
    _paced_backlog(rate_limit=RATE)
    sent: list[datetime] = []

    _drain_on_a_stepped_clock(sent)

    _assert_paced_once(sent, claims)


def test_a_plan_paced_backlog_is_claimed_once_a_row_and_goes_at_the_rate(claims):
    _paced_backlog(plan_rate=RATE)
    sent: list[datetime] = []

    _drain_on_a_stepped_clock(sent)

    _assert_paced_once(sent, claims)


def test_rows_whose_slots_other_ticks_hold_go_back_unlogged_and_are_left_alone(claims):
    """Another tick process holds the endpoint's slots for the next minute: the rows take
    none, go back unattempted with no delivery-log row, and the process's next tick leaves
    the endpoint's rows alone instead of claiming them again."""
    tenant = _paced_backlog(rate_limit=RATE)
    endpoint = tenant.webhook_endpoints.get()
    pacing.reserve_slots(f"webhook:{endpoint.pk}", rate=RATE, count=120, now=NOW)
    sent: list[datetime] = []

    clock = SteppedClock(NOW)
    first = run_tick(clock=clock, stop=Stepping(clock), senders=recording_senders(sent, clock))
    again = run_tick(clock=clock, stop=Stepping(clock), senders=recording_senders(sent, clock))

    assert sent == []
    assert first.released == first.claimed <= 8  # one claim of the endpoint's default share
    assert again.claimed == 0
    assert not Delivery.objects.exists()
    assert Notification.objects.filter(state=NotificationState.SCHEDULED).count() == ROWS
