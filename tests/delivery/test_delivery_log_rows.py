"""What the tick writes in the delivery log: each attempt's endpoint, its attempt number
within the occurrence, a safe error and when the row was written."""

from datetime import UTC, datetime, timedelta

from delivery.models import Delivery, Notification
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
from delivery.transports.base import DeliveryResult
from tests.delivery.factories import make_endpoint, make_notification

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


def _senders(result: DeliveryResult) -> Senders:
    return Senders(
        email=lambda message, *, timeout: DeliveryResult(ok=True, http_status=200),
        webhook=lambda message, *, timeout: result,
    )


def test_each_attempt_is_logged_with_its_endpoint_and_number(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url="https://hooks.example.com/in")
    notification = make_notification(tenant=alice.tenant, endpoint=endpoint, next_fire_at=NOW)
    # An e-mail has no endpoint, even beside a webhook notification's.
    make_notification(
        tenant=alice.tenant,
        channels=["email"],
        email_to=["ops@example.com"],
        endpoint=endpoint,
        next_fire_at=NOW,
    )
    failure = DeliveryResult(
        ok=False,
        http_status=None,
        error="connection to https://hooks.example.com:443 failed",
        category="connection",
    )

    run_tick(now=NOW, senders=_senders(failure))
    retry_at = Notification.objects.get(pk=notification.pk).next_fire_at
    run_tick(now=retry_at + timedelta(seconds=1), senders=_senders(DeliveryResult(ok=True)))

    rows = list(Delivery.objects.order_by("attempted_at", "channel"))
    assert [(r.channel, r.outcome, r.attempt, r.endpoint_id) for r in rows] == [
        ("email", "delivered", 1, None),
        ("webhook", "failed", 1, endpoint.id),
        ("webhook", "delivered", 2, endpoint.id),
    ]
    assert all(row.created_at is not None for row in rows)

    shown = alice.client().get(f"/v1/deliveries?endpoint_id={endpoint.id}").json()["results"]
    assert [(row["attempt"], row["outcome"]) for row in shown] == [(2, "delivered"), (1, "failed")]
    assert shown[1]["error"] == "connection to <url> failed"
    assert shown[1]["endpoint_id"] == str(endpoint.id)
