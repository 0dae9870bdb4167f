"""A webhook endpoint's `rate_limit`: deliveries per second across every tick process, held
by a pacing budget in the database. A delivery over it is deferred to the next free slot:
not failed, not an attempt. The tick's clock is injected."""

from datetime import UTC, datetime, timedelta

import pytest

from delivery.models import Delivery, Notification, NotificationState
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
from delivery.transports.base import DeliveryResult
from tests.delivery.factories import make_endpoint, make_notifications

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
URL = "https://hooks.example.com/in"


def ok_senders(sent: list) -> Senders:
    def webhook(message, *, timeout):
        sent.append(message.msg_id)
        return DeliveryResult(ok=True, http_status=200)

    def email(message, *, timeout):
        return DeliveryResult(ok=True, http_status=200)

    return Senders(email=email, webhook=webhook)


def test_deliveries_over_the_limit_are_deferred_to_the_next_slot_unattempted(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url=URL)
    endpoint.rate_limit = 2
    endpoint.save()
    rows = make_notifications(4, tenant=alice.tenant, endpoint=endpoint, next_fire_at=NOW)
    sent: list[str] = []

    run_tick(now=NOW, senders=ok_senders(sent))

    assert len(sent) == 1
    waiting = Notification.objects.filter(pk__in=[r.pk for r in rows]).exclude(
        state=NotificationState.COMPLETED
    )
    assert waiting.count() == 3
    for row in waiting:
        assert row.state == NotificationState.SCHEDULED
        assert row.error_count == 0
        assert row.next_fire_at == NOW + timedelta(seconds=0.5)
    deferred = Delivery.objects.filter(outcome="deferred")
    assert {d.error_category for d in deferred} == {"endpoint_rate_limit"}

    run_tick(now=NOW + timedelta(seconds=0.5), senders=ok_senders(sent))

    assert len(sent) == 2


def test_an_endpoint_without_a_limit_is_not_paced(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url=URL)
    make_notifications(4, tenant=alice.tenant, endpoint=endpoint, next_fire_at=NOW)
    sent: list[str] = []

    run_tick(now=NOW, senders=ok_senders(sent))

    assert len(sent) == 4


@pytest.mark.parametrize("value", [0, -1, 1001, 2.5, "5", True])
def test_a_rate_limit_out_of_bounds_is_a_400(alice, value):
    endpoint = make_endpoint(tenant=alice.tenant, url=URL)

    response = alice.client().patch(
        f"/v1/webhook-endpoints/{endpoint.id}", {"rate_limit": value}, format="json"
    )

    assert response.status_code == 400
    assert "rate_limit" in response.json()["errors"]
    endpoint.refresh_from_db()
    assert endpoint.rate_limit is None


def test_a_rate_limit_is_set_and_removed_by_patch(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url=URL)
    path = f"/v1/webhook-endpoints/{endpoint.id}"

    assert alice.client().patch(path, {"rate_limit": 5}, format="json").json()["rate_limit"] == 5
    assert alice.client().patch(path, {"enabled": True}, format="json").json()["rate_limit"] == 5
    assert (
        alice.client().patch(path, {"rate_limit": None}, format="json").json()["rate_limit"] is None
    )
