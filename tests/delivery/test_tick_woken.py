"""A looping tick told that rows became due while it runs (its LISTEN) claims them in the
same tick, even after its claims found the queue drained; untold, it leaves them to the
next tick. One that delivered something lingers for rows to become due before it ends."""

from datetime import UTC, datetime

import pytest
from django.utils import timezone

from delivery.models import Notification, NotificationState
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick, tick_worker
from delivery.transports.base import DeliveryResult
from tests.delivery.factories import make_endpoint, make_notification

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


def delivered(message, *, timeout):
    return DeliveryResult(ok=True, http_status=200)


SENDERS = Senders(email=delivered, webhook=delivered)


def committed_during_the_tick(alice, endpoint, *, told: bool):
    """A `woken` that, once the tick's first claim is done, writes a row due now and says
    so only when `told`."""
    asked = []

    def woken() -> bool:
        asked.append(True)
        if len(asked) != 2:
            return False
        make_notification(tenant=alice.tenant, endpoint=endpoint, next_fire_at=NOW)
        return told

    return woken


@pytest.mark.parametrize("told", [True, False])
def test_rows_committed_while_the_tick_runs_are_claimed_when_it_is_told(alice, told):
    endpoint = make_endpoint(tenant=alice.tenant, url="http://127.0.0.1:9/unused")
    make_notification(tenant=alice.tenant, endpoint=endpoint, next_fire_at=NOW)

    summary = run_tick(
        now=NOW, senders=SENDERS, woken=committed_during_the_tick(alice, endpoint, told=told)
    )

    states = sorted(Notification.objects.values_list("state", flat=True))
    if told:
        assert (summary.claimed, summary.delivered) == (2, 2)
        assert states == [NotificationState.COMPLETED] * 2
    else:
        assert (summary.claimed, summary.delivered) == (1, 1)
        assert states == [NotificationState.COMPLETED, NotificationState.SCHEDULED]


class Lingering:
    """A `linger` that writes a row due now (and reports it) the first `rows` times it is
    asked, then finds nothing; it records each wait it was asked for and whether the
    tick's rows were written back by then."""

    def __init__(self, alice, endpoint, *, rows: int) -> None:
        self.alice, self.endpoint, self.rows = alice, endpoint, rows
        self.waits: list[float] = []
        self.unfinished_when_asked: list[int] = []

    def __call__(self, seconds: float, stop) -> bool:
        self.waits.append(seconds)
        self.unfinished_when_asked.append(
            Notification.objects.exclude(state=NotificationState.COMPLETED).count()
        )
        if len(self.waits) > self.rows:
            return False
        make_notification(tenant=self.alice.tenant, endpoint=self.endpoint, next_fire_at=NOW)
        return True


def test_a_tick_with_nothing_left_lingers_and_delivers_what_becomes_due_meanwhile(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url="http://127.0.0.1:9/unused")
    make_notification(tenant=alice.tenant, endpoint=endpoint, next_fire_at=NOW)
    linger = Lingering(alice, endpoint, rows=2)

    summary = run_tick(now=NOW, senders=SENDERS, time_budget=40, linger=linger)

    # One tick delivered the row and the two that became due while it lingered.
    assert (summary.claimed, summary.delivered) == (3, 3)
    assert Notification.objects.filter(state=NotificationState.COMPLETED).count() == 3
    # Each time, its rows were written back before it waited, for the rest of its budget.
    assert linger.unfinished_when_asked == [0, 0, 0]
    assert len(linger.waits) == 3
    assert all(0 < seconds <= 40 for seconds in linger.waits)


def test_a_tick_that_delivered_nothing_does_not_linger(alice):
    linger = Lingering(alice, make_endpoint(tenant=alice.tenant, url="http://x.test/"), rows=1)

    summary = run_tick(now=NOW, senders=SENDERS, linger=linger)

    assert summary.claimed == 0
    assert linger.waits == []


def test_a_single_tick_of_a_worker_that_does_not_listen_ends_when_done(alice, settings):
    # Cron's run_tick: the worker's LISTEN connection is never opened, so its tick does not
    # wait for rows to become due even with DATABASE_LISTEN_URL set.
    settings.DATABASE_LISTEN_URL = "postgres://127.0.0.1:9/never-opened"
    endpoint = make_endpoint(tenant=alice.tenant, url="http://127.0.0.1:9/unused")
    make_notification(tenant=alice.tenant, endpoint=endpoint, next_fire_at=timezone.now())
    worker = tick_worker(max_rows=None, interval=60, report=print, report_error=print)
    waits: list[float] = []
    worker.waiter.wait = lambda seconds, stop: waits.append(seconds) or False

    summary = worker.run_once()

    assert summary.claimed == 1
    assert waits == []
