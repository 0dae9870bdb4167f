"""A looping tick told that rows became due while it runs (its LISTEN) claims them in the
same tick, even after its claims found the queue drained; untold, it leaves them to the
next tick."""

from datetime import UTC, datetime

import pytest

from delivery.models import Notification, NotificationState
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
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
