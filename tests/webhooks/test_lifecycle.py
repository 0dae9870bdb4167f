"""Endpoints that retire themselves: failing every delivery for ENDPOINT_DISABLE_AFTER_HOURS
disables an endpoint (`disabled: true`, `disabled_reason: "failing"`), parks its pending
deliveries, tells the owners once by e-mail and the tenant's other endpoints by an
`endpoint.disabled` event; PATCH {disabled: false} enables it again and un-parks them.
The tick's clock is injected."""

from datetime import UTC, datetime, timedelta

import pytest

from delivery.models import Notification, NotificationSource, NotificationState
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
from delivery.transports.base import DeliveryResult
from tests.delivery.factories import make_endpoint, make_notification, make_notifications

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
URL = "https://hooks.example.com/in"
OTHER_URL = "https://hooks.example.com/other"


def senders(status: int) -> Senders:
    def webhook(message, *, timeout):
        if status < 300:
            return DeliveryResult(ok=True, http_status=status)
        return DeliveryResult(
            ok=False, http_status=status, error=f"HTTP {status}", category="http_5xx"
        )

    def email(message, *, timeout):
        return DeliveryResult(ok=True, http_status=200)

    return Senders(email=email, webhook=webhook)


@pytest.fixture
def failing(alice, settings):
    settings.ENDPOINT_DISABLE_AFTER_HOURS = 120
    return make_endpoint(tenant=alice.tenant, url=URL)


def deliver_one(endpoint, *, at: datetime, status: int) -> None:
    """One delivery to `endpoint` due at `at`, attempted by a tick at `at`."""
    make_notification(tenant=endpoint.tenant, endpoint=endpoint, next_fire_at=at)
    run_tick(now=at, senders=senders(status))


def shown(actor, endpoint) -> dict:
    response = actor.client().get(f"/v1/webhook-endpoints/{endpoint.id}")
    assert response.status_code == 200
    return response.json()


def announcements(tenant):
    return Notification.objects.filter(tenant=tenant, source=NotificationSource.SYSTEM)


def test_failing_for_the_whole_period_disables_it_and_parks_its_deliveries(alice, bob, failing):
    other = make_endpoint(tenant=alice.tenant, url=OTHER_URL, event_types=["endpoint.disabled"])
    # Subscribed to every type: not to the product's operational events.
    make_endpoint(tenant=alice.tenant, url=f"{OTHER_URL}/all")
    later = T0 + timedelta(days=30)
    pending = make_notifications(3, tenant=alice.tenant, endpoint=failing, next_fire_at=later)
    recurring = make_notification(
        tenant=alice.tenant, endpoint=failing, next_fire_at=later, rrule="FREQ=DAILY"
    )
    deliver_one(failing, at=T0, status=500)

    deliver_one(failing, at=T0 + timedelta(hours=119), status=500)
    assert shown(alice, failing)["disabled"] is False

    deliver_one(failing, at=T0 + timedelta(hours=120), status=500)

    body = shown(alice, failing)
    assert (body["enabled"], body["disabled"], body["disabled_reason"]) == (
        False,
        True,
        "failing",
    )
    for row in pending:
        row.refresh_from_db()
        assert row.state == NotificationState.PARKED
    recurring.refresh_from_db()
    assert recurring.state == NotificationState.SCHEDULED
    [email] = announcements(alice.tenant).filter(channels=["email"])
    assert email.email_to == ["alice@example.com"]  # the owner, not Bob the member
    [event] = announcements(alice.tenant).filter(channels=["webhook"])
    assert event.webhook_endpoint_id == other.id
    assert event.webhook_event["type"] == "endpoint.disabled"
    assert event.message.payload["endpoint_id"] == str(failing.id)
    assert event.message.payload["disabled_reason"] == "failing"


def test_the_owners_are_told_once(alice, failing):
    deliver_one(failing, at=T0, status=500)
    deliver_one(failing, at=T0 + timedelta(hours=120), status=500)
    deliver_one(failing, at=T0 + timedelta(hours=121), status=500)

    assert announcements(alice.tenant).filter(channels=["email"]).count() == 1


def test_a_success_in_between_starts_the_period_again(alice, failing):
    deliver_one(failing, at=T0, status=500)
    deliver_one(failing, at=T0 + timedelta(hours=60), status=200)
    deliver_one(failing, at=T0 + timedelta(hours=61), status=500)

    deliver_one(failing, at=T0 + timedelta(hours=121), status=500)

    assert shown(alice, failing)["disabled"] is False
    assert not announcements(alice.tenant).exists()


def test_the_period_is_configurable(alice, failing, settings):
    settings.ENDPOINT_DISABLE_AFTER_HOURS = 1
    deliver_one(failing, at=T0, status=500)

    deliver_one(failing, at=T0 + timedelta(hours=1), status=500)

    assert shown(alice, failing)["disabled_reason"] == "failing"


def test_enabling_it_again_unparks_its_deliveries_in_creation_order(alice, failing):
    later = T0 + timedelta(days=30)
    pending = [
        make_notification(
            tenant=alice.tenant,
            endpoint=failing,
            next_fire_at=later,
            created_at=T0 - timedelta(minutes=minutes),
        )
        for minutes in (1, 3, 2)
    ]
    deliver_one(failing, at=T0, status=500)
    deliver_one(failing, at=T0 + timedelta(hours=120), status=500)
    # The three, and the two failed deliveries waiting for their retry.
    assert Notification.objects.filter(state=NotificationState.PARKED).count() == 5

    response = alice.client().patch(
        f"/v1/webhook-endpoints/{failing.id}", {"disabled": False}, format="json"
    )

    assert response.status_code == 200
    body = response.json()
    assert (body["enabled"], body["disabled"], body["disabled_reason"]) == (True, False, None)
    assert body["health"]["state"] == "healthy"
    rows = Notification.objects.filter(pk__in=[row.pk for row in pending]).order_by("next_fire_at")
    assert all(row.state == NotificationState.SCHEDULED for row in rows)
    assert [row.created_at for row in rows] == sorted(row.created_at for row in rows)


def test_disabled_and_enabled_must_agree(alice, failing):
    response = alice.client().patch(
        f"/v1/webhook-endpoints/{failing.id}", {"disabled": True, "enabled": True}, format="json"
    )

    assert response.status_code == 400
    assert "disabled" in response.json()["errors"]
    failing.refresh_from_db()
    assert failing.enabled


def test_disabling_by_hand_is_manual_in_the_api_the_row_and_the_admin(alice, failing, admin_client):
    response = alice.client().patch(
        f"/v1/webhook-endpoints/{failing.id}", {"disabled": True}, format="json"
    )
    page = admin_client.get(f"/admin/delivery/webhookendpoint/{failing.id}/change/")
    manual = admin_client.get("/admin/delivery/webhookendpoint/?disabled_reason=manual")
    listing = admin_client.get("/admin/delivery/webhookendpoint/")

    assert (response.json()["disabled"], response.json()["disabled_reason"]) == (True, "manual")
    failing.refresh_from_db()
    assert failing.disabled_reason == "manual"
    assert "manual" in page.content.decode()
    assert failing.url in manual.content.decode()
    # The filter offers the reason, not only "All".
    assert "?disabled_reason=manual" in listing.content.decode()


def test_an_owner_address_the_api_would_refuse_does_not_stop_the_retirement(alice, failing):
    alice.user.email = "not an address"
    alice.user.save()
    deliver_one(failing, at=T0, status=500)

    deliver_one(failing, at=T0 + timedelta(hours=120), status=500)

    assert shown(alice, failing)["disabled_reason"] == "failing"
    assert not announcements(alice.tenant).filter(channels=["email"]).exists()
