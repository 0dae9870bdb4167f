"""An endpoint's health as a front end reads it: `failing` while every delivery since its
last success failed, a 4xx answer included; a 4xx never opens the circuit."""

from datetime import UTC, datetime, timedelta

from delivery.models import WebhookEndpoint
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
from delivery.transports.base import DeliveryResult
from tests.delivery.factories import make_endpoint, make_notifications

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
URL = "https://hooks.example.com/in"


def senders(status: int) -> Senders:
    def webhook(message, *, timeout):
        if status < 300:
            return DeliveryResult(ok=True, http_status=status)
        return DeliveryResult(
            ok=False, http_status=status, error=f"HTTP {status}", category="http_4xx"
        )

    def email(message, *, timeout):
        return DeliveryResult(ok=True, http_status=200)

    return Senders(email=email, webhook=webhook)


def health(actor, endpoint) -> dict:
    response = actor.client().get(f"/v1/webhook-endpoints/{endpoint.id}")
    assert response.status_code == 200
    return response.json()["health"]


def test_an_endpoint_refusing_every_delivery_is_failing_with_its_circuit_closed(alice, settings):
    settings.WEBHOOK_CIRCUIT_FAILURES = 3
    endpoint = make_endpoint(tenant=alice.tenant, url=URL)
    make_notifications(6, tenant=alice.tenant, endpoint=endpoint, next_fire_at=NOW)

    run_tick(now=NOW, senders=senders(404))

    shown = health(alice, endpoint)
    assert shown["state"] == "failing"
    assert shown["consecutive_failures"] == 6
    assert shown["open_until"] is None
    assert shown["last_failure_at"] is not None
    endpoint.refresh_from_db()
    assert endpoint.circuit_open_until is None


def test_a_success_after_refusals_makes_it_healthy_again(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url=URL)
    make_notifications(2, tenant=alice.tenant, endpoint=endpoint, next_fire_at=NOW)
    run_tick(now=NOW, senders=senders(400))
    assert health(alice, endpoint)["state"] == "failing"
    make_notifications(1, tenant=alice.tenant, endpoint=endpoint, next_fire_at=NOW)

    run_tick(now=NOW + timedelta(hours=1), senders=senders(200))

    assert health(alice, endpoint) | {"last_failure_at": None} == {
        "state": "healthy",
        "consecutive_failures": 0,
        "open_until": None,
        "last_failure_at": None,
    }


def test_an_endpoint_never_delivered_to_is_healthy_and_a_rotation_clears_failing(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url=URL)
    assert health(alice, endpoint)["state"] == "healthy"
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(failed_deliveries=3)
    assert health(alice, endpoint)["state"] == "failing"

    rotated = alice.client().post(f"/v1/webhook-endpoints/{endpoint.id}/rotate-secret")

    assert rotated.status_code == 200

    assert health(alice, endpoint)["state"] == "healthy"
