"""A claimant whose lease ran out and whose row was reclaimed cannot overwrite the new
claimant's state, on any write-back move; the drop is counted and logged."""

from datetime import UTC, datetime, timedelta

import pytest

from delivery.models import Delivery, Notification
from delivery.scheduler import tick as tick_module
from delivery.scheduler.deliver import RowDelivery
from delivery.scheduler.plan import Policy, plan_delivery
from delivery.scheduler.tick import notification_claim, run_tick
from delivery.scheduler.writeback import write_back
from delivery.states import Move
from delivery.transports.base import DeliveryResult
from outbound.categories import ErrorCategory
from tests.delivery.factories import make_endpoint, make_notification, make_tenant
from tests.support.http_server import recording_server

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
LEASE = timedelta(seconds=45)
POLICY = Policy(backoff=(60, 300, 1800))
OK = DeliveryResult(ok=True, http_status=200)
HTTP_500 = DeliveryResult(ok=False, category=ErrorCategory.HTTP_5XX, http_status=500)
HTTP_404 = DeliveryResult(
    ok=False, category=ErrorCategory.HTTP_4XX, http_status=404, permanent=True
)

CASES = [
    # (move, rrule, result)
    (Move.COMPLETE, "", OK),
    (Move.ADVANCE, "FREQ=DAILY", OK),
    (Move.BACK_OFF, "", HTTP_500),
    (Move.DEAD_LETTER, "", HTTP_404),
]


def claim_then_reclaim(row: Notification) -> tuple[Notification, int]:
    """Claim as t1, let that lease expire, reclaim as t2; returns (t1's copy, t2)."""
    [stale] = notification_claim(now=NOW, lease=LEASE, limit=1)
    [fresh] = notification_claim(now=NOW + LEASE + timedelta(seconds=1), lease=LEASE, limit=1)
    assert fresh.claim_token == stale.claim_token + 1
    return stale, fresh.claim_token


@pytest.mark.parametrize(("move", "rrule", "result"), CASES, ids=[c[0].value for c in CASES])
def test_stale_write_back_is_fenced_out_on_every_move(db, caplog, move, rrule, result):
    row = make_notification(tenant=make_tenant(), next_fire_at=NOW, rrule=rrule)
    stale, fresh_token = claim_then_reclaim(row)
    delivery = RowDelivery(notification=stale, results={"webhook": result}, attempted_at=NOW)
    plan = plan_delivery(delivery, token=stale.claim_token, now=NOW, policy=POLICY)
    assert plan.move is move

    fenced = write_back([plan], now=NOW)

    assert fenced == [plan]
    current = Notification.objects.get(pk=row.pk)
    assert current.claim_token == fresh_token
    assert current.claimed_until == NOW + LEASE + timedelta(seconds=1) + LEASE
    assert (current.next_fire_at, current.occurrence, current.error_count) == (NOW, 1, 0)
    assert (current.dead_letter_reason, current.state) == ("", "scheduled")
    expected = f"fenced out on {move.value} for row {row.pk}, claim_token={stale.claim_token}"
    assert expected in caplog.text
    # The HTTP calls happened: the log keeps them even though the outcome was dropped.
    assert Delivery.objects.filter(notification_id=row.pk).exists()


def test_current_claimant_write_back_applies(db):
    row = make_notification(tenant=make_tenant(), next_fire_at=NOW)
    [claimed] = notification_claim(now=NOW, lease=LEASE, limit=1)
    delivery = RowDelivery(notification=claimed, results={"webhook": OK}, attempted_at=NOW)
    plan = plan_delivery(delivery, token=claimed.claim_token, now=NOW, policy=POLICY)

    assert write_back([plan], now=NOW) == []
    row.refresh_from_db()
    assert (row.state, row.next_fire_at, row.claimed_until) == ("completed", None, None)


def test_tick_counts_and_logs_a_write_back_lost_to_a_reclaim(db, settings, caplog, monkeypatch):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    tenant = make_tenant()
    real_write_back = tick_module.write_back

    def reclaimed_meanwhile(plans, *, now, **options):
        # Our lease ran out during delivery and another tick took the row.
        notification_claim(now=NOW + LEASE + timedelta(seconds=1), lease=LEASE, limit=10)
        return real_write_back(plans, now=now, **options)

    monkeypatch.setattr(tick_module, "write_back", reclaimed_meanwhile)
    with recording_server() as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        row = make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=NOW)

        summary = run_tick(now=NOW)

    assert (summary.claimed, summary.fenced_out) == (1, 1)
    assert Notification.objects.get(pk=row.pk).claim_token == 2
    assert f"fenced out on complete for row {row.pk}, claim_token=1" in caplog.text


def test_batched_write_back_applies_ours_and_fences_only_the_reclaimed(db):
    tenant = make_tenant()
    ours = make_notification(tenant=tenant, next_fire_at=NOW, rrule="FREQ=DAILY")
    lost = make_notification(
        tenant=tenant, next_fire_at=NOW - timedelta(minutes=1), rrule="FREQ=HOURLY"
    )
    claimed = {row.pk: row for row in notification_claim(now=NOW, lease=LEASE, limit=2)}
    Notification.objects.filter(pk=lost.pk).update(claim_token=99)
    plans = [
        plan_delivery(
            RowDelivery(notification=row, results={"webhook": OK}, attempted_at=NOW),
            token=row.claim_token,
            now=NOW,
            policy=POLICY,
        )
        for row in claimed.values()
    ]

    fenced = write_back(plans, now=NOW)

    assert [plan.pk for plan in fenced] == [lost.pk]
    ours.refresh_from_db()
    lost.refresh_from_db()
    assert (ours.occurrence, ours.next_fire_at, ours.claimed_until) == (
        2,
        NOW + timedelta(days=1),
        None,
    )
    assert (lost.occurrence, lost.claim_token) == (1, 99)
