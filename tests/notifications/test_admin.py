"""The support admin of notifications: queue filters, the change page's delivery log, retries,
unparking, dates. The delivery log's own pages are in tests/delivery/test_admin.py, the
endpoints' and messages' in tests/webhooks/test_admin.py."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from delivery.models import Delivery, Notification
from tests.delivery.factories import make_notification, make_tenant

CHANGELIST = "/admin/delivery/notification/"


@pytest.fixture
def tenant(db):
    return make_tenant("Acme")


def _mail(**fields):
    return make_notification(channels=["email"], email_to=["ops@example.com"], **fields)


def _rows(tenant):
    now = timezone.now()
    return {
        "due": _mail(tenant=tenant, next_fire_at=now - timedelta(minutes=1)),
        "backing_off": _mail(tenant=tenant, next_fire_at=now, error_count=1),
        "dead_lettered": _mail(
            tenant=tenant, next_fire_at=None, error_count=3, dead_letter_reason="exhausted"
        ),
        "parked": _mail(tenant=tenant, next_fire_at=None),
        "claimed": _mail(
            tenant=tenant, next_fire_at=now, claimed_until=now + timedelta(seconds=40)
        ),
    }


@pytest.mark.parametrize("state", ["due", "backing_off", "dead_lettered", "parked", "claimed"])
def test_state_filters_select_their_rows(admin_client, tenant, state):
    rows = _rows(tenant)

    response = admin_client.get(CHANGELIST, {"state": state})

    assert response.status_code == 200
    shown = {n.pk for n in response.context["cl"].result_list}
    assert rows[state].pk in shown
    assert rows["parked" if state != "parked" else "claimed"].pk not in shown


def test_change_page_shows_the_delivery_log_and_read_only_claim_columns(admin_client, tenant):
    notification = make_notification(tenant=tenant, next_fire_at=None, claim_token=7)
    Delivery.objects.create(
        tenant=tenant,
        notification_id=notification.id,
        occurrence=3,
        channel="webhook",
        outcome="failed",
        http_status=502,
        error_category="http_5xx",
    )
    Delivery.objects.create(
        tenant=tenant,
        notification_id=uuid.uuid4(),
        occurrence=99,
        channel="email",
        outcome="delivered",
    )

    response = admin_client.get(f"{CHANGELIST}{notification.id}/change/")

    html = response.content.decode()
    assert response.status_code == 200
    assert "http_5xx" in html and "502" in html
    assert f"/admin/delivery/delivery/?notification_id={notification.id}" in html
    assert 'name="claim_token"' not in html
    assert 'name="claimed_until"' not in html


def test_retry_now_rearms_failing_rows_and_skips_claimed_and_healthy_ones(admin_client, tenant):
    rows = _rows(tenant)
    now = timezone.now()
    claimed_failing = _mail(
        tenant=tenant, next_fire_at=now, error_count=1, claimed_until=now + timedelta(seconds=40)
    )
    ids = [rows["dead_lettered"].pk, claimed_failing.pk, rows["due"].pk]

    response = admin_client.post(
        CHANGELIST, {"action": "retry_now", "_selected_action": ids}, follow=True
    )

    assert response.status_code == 200
    html = response.content.decode()
    assert f"{claimed_failing.pk} (being delivered)" in html
    assert f"{rows['due'].pk} (not failing)" in html
    retried = Notification.objects.get(pk=rows["dead_lettered"].pk)
    assert (retried.state, retried.error_count, retried.dead_letter_reason) == ("scheduled", 0, "")
    assert Notification.objects.get(pk=claimed_failing.pk).claim_token == 0
    healthy = Notification.objects.get(pk=rows["due"].pk)
    assert (healthy.claim_token, healthy.next_fire_at) == (0, rows["due"].next_fire_at)


def test_unpark_only_touches_parked_rows(admin_client, tenant):
    rows = _rows(tenant)
    ids = [rows["parked"].pk, rows["backing_off"].pk]

    response = admin_client.post(
        CHANGELIST, {"action": "unpark", "_selected_action": ids}, follow=True
    )

    assert "not dead-lettered or parked" in response.content.decode()
    assert Notification.objects.get(pk=rows["parked"].pk).state == "scheduled"
    assert Notification.objects.get(pk=rows["backing_off"].pk).error_count == 1


def test_every_admin_page_writes_dates_one_way(admin_client, tenant):
    at = datetime(2026, 3, 2, 21, 5, 7, tzinfo=UTC)
    notification = make_notification(tenant=tenant, next_fire_at=at)
    Delivery.objects.create(
        tenant=tenant,
        notification_id=notification.id,
        occurrence=1,
        channel="webhook",
        outcome="delivered",
        attempted_at=at,
    )

    pages = [
        admin_client.get(f"{CHANGELIST}{notification.id}/change/").content.decode(),
        admin_client.get("/admin/delivery/delivery/").content.decode(),
    ]

    for html in pages:
        assert "2026-03-02 21:05:07 UTC" in html
        assert "p.m." not in html and "March 2, 2026" not in html


def test_dead_letters_name_their_endpoint_recipients_and_message(admin_client, tenant):
    from tests.delivery.factories import make_endpoint
    from webhooks.event_types import event_type_create
    from webhooks.messages import publish_message

    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/orders/in")
    event_type_create(tenant=tenant, name="order.shipped")
    message = publish_message(
        tenant=tenant, event_type="order.shipped", payload={}, event_id="evt_4711"
    )
    Notification.objects.filter(message=message).update(
        state="dead_lettered", next_fire_at=None, error_count=3, dead_letter_reason="exhausted"
    )
    _mail(tenant=tenant, next_fire_at=None, error_count=3, dead_letter_reason="exhausted")

    html = admin_client.get(f"{CHANGELIST}?state=dead_lettered").content.decode()

    assert f"webhook: {endpoint.url}" in html
    assert "email: ops@example.com" in html
    assert f"message {message.id} (evt_4711)" in html
    assert endpoint.secret not in html
