"""A message's deliveries belong to the message: /v1/notifications does not list them and
refuses to edit, re-arm, retry or delete one (409 message-delivery), changing nothing; one
stays readable. The admin shows one read-only and never deletes it."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.models import Notification, NotificationState
from tests.delivery.factories import make_endpoint, make_notification
from web.problems import PROBLEM_CONTENT_TYPE
from webhooks.event_types import event_type_create
from webhooks.messages import publish_message

CHANGELIST = "/admin/delivery/notification/"
# Every column a refused change could have written.
WATCHED = ("state", "rrule", "next_fire_at", "due_at", "error_count", "claim_token", "subject")


def _delivery(tenant, **state):
    """The one delivery of a message to a fresh endpoint, with `state` written over it."""
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/in")
    event_type_create(tenant=tenant, name="order.shipped")
    message = publish_message(tenant=tenant, event_type="order.shipped", payload={"n": 1})
    rows = Notification.objects.filter(message=message)
    rows.update(**state)
    [row] = rows
    assert row.webhook_endpoint_id == endpoint.id
    return row


def _delivered(tenant):
    return _delivery(tenant, state=NotificationState.COMPLETED, next_fire_at=None, due_at=None)


def _backing_off(tenant):
    later = timezone.now() + timedelta(minutes=5)
    return _delivery(
        tenant, state=NotificationState.BACKING_OFF, error_count=1, next_fire_at=later, due_at=later
    )


def _watched(row):
    return Notification.objects.filter(pk=row.pk).values_list(*WATCHED).get()


def _assert_message_delivery_problem(response, row):
    assert response.status_code == 409
    assert response["Content-Type"] == PROBLEM_CONTENT_TYPE
    body = response.json()
    assert body["type"].endswith("/message-delivery")
    assert body["message_id"] == str(row.message_id)
    assert body["endpoint_id"] == str(row.webhook_endpoint_id)
    assert "resend" in body["detail"]


def test_the_list_leaves_out_a_message_s_deliveries(alice):
    delivery = _delivered(alice.tenant)
    own = make_notification(tenant=alice.tenant, next_fire_at=timezone.now())

    for query in ("", "?state=completed", "?state=scheduled", "?source=api"):
        listed = alice.client().get(f"/v1/notifications{query}").json()["results"]
        assert str(delivery.id) not in {row["id"] for row in listed}, query
    everything = alice.client().get("/v1/notifications").json()["results"]
    assert [row["id"] for row in everything] == [str(own.id)]


def test_one_stays_readable_with_its_log(alice):
    delivery = _delivered(alice.tenant)

    assert alice.client().get(f"/v1/notifications/{delivery.id}").status_code == 200
    assert alice.client().get(f"/v1/notifications/{delivery.id}/deliveries").status_code == 200


@pytest.mark.parametrize("make", [_delivered, _backing_off])
@pytest.mark.parametrize(
    "changes",
    [
        {"rrule": "FREQ=DAILY"},
        {"fire_at": "2031-01-01T00:00:00Z"},
        {"subject": "Edited"},
    ],
)
def test_patch_is_refused_and_changes_nothing(alice, make, changes):
    delivery = make(alice.tenant)
    before = _watched(delivery)

    response = alice.client().patch(f"/v1/notifications/{delivery.id}", changes, format="json")

    _assert_message_delivery_problem(response, delivery)
    assert _watched(delivery) == before


@pytest.mark.parametrize("make", [_delivered, _backing_off])
def test_delete_is_refused_and_keeps_the_row(alice, make):
    delivery = make(alice.tenant)

    response = alice.client().delete(f"/v1/notifications/{delivery.id}")

    _assert_message_delivery_problem(response, delivery)
    assert Notification.objects.filter(pk=delivery.pk).exists()


@pytest.mark.parametrize(
    "state",
    [NotificationState.DEAD_LETTERED, NotificationState.PARKED, NotificationState.BACKING_OFF],
)
def test_retry_is_refused_and_changes_nothing(alice, state):
    delivery = _delivery(
        alice.tenant,
        state=state,
        error_count=1,
        next_fire_at=None,
        dead_letter_reason="exhausted" if state == NotificationState.DEAD_LETTERED else "",
    )
    before = _watched(delivery)

    response = alice.client().post(
        f"/v1/notifications/{delivery.id}/retry", headers={"Idempotency-Key": str(uuid.uuid4())}
    )

    _assert_message_delivery_problem(response, delivery)
    assert _watched(delivery) == before


def test_another_tenant_s_delivery_is_still_404(alice, charlie):
    delivery = _delivered(charlie.tenant)

    client, path = alice.client(), f"/v1/notifications/{delivery.id}"

    assert client.delete(path).status_code == 404
    assert client.patch(path, {"subject": "x"}, format="json").status_code == 404
    assert Notification.objects.filter(pk=delivery.pk).exists()


def test_the_admin_page_is_read_only_with_no_buttons(admin_client, tenant):
    delivery = _delivery(tenant, state=NotificationState.DEAD_LETTERED, next_fire_at=None)

    page = admin_client.get(f"{CHANGELIST}{delivery.pk}/change/")

    html = page.content.decode()
    assert page.status_code == 200
    assert 'name="rrule"' not in html and 'name="subject"' not in html
    assert f"{CHANGELIST}{delivery.pk}/state/retry/" not in html
    assert f"/admin/webhooks/message/{delivery.message_id}/change/" in html
    assert f"{CHANGELIST}{delivery.pk}/delete/" not in html


def test_an_admin_rule_does_not_re_arm_a_delivered_delivery(admin_client, tenant):
    delivery = _delivered(tenant)
    before = _watched(delivery)

    response = admin_client.post(
        f"{CHANGELIST}{delivery.pk}/change/",
        {
            "subject": delivery.subject,
            "channels": delivery.channels,
            "webhook_endpoint": delivery.webhook_endpoint_id,
            "rrule": "FREQ=DAILY",
            "timezone": "UTC",
        },
    )

    assert response.status_code == 403
    assert _watched(delivery) == before


@pytest.mark.parametrize(
    ("button", "action", "refused"),
    # A one-shot row has no button for the next occurrence at all.
    [("retry", "retry_now", 403), ("unpark", "unpark", 404)],
)
def test_the_admin_state_buttons_and_actions_leave_it_alone(
    admin_client, tenant, button, action, refused
):
    delivery = _delivery(tenant, state=NotificationState.PARKED, next_fire_at=None)
    before = _watched(delivery)

    pressed = admin_client.post(f"{CHANGELIST}{delivery.pk}/state/{button}/")
    acted = admin_client.post(
        CHANGELIST, {"action": action, "_selected_action": [delivery.pk]}, follow=True
    )

    assert pressed.status_code == refused
    assert "a message&#x27;s delivery" in acted.content.decode()
    assert _watched(delivery) == before


def test_the_admin_deletes_no_delivery_one_by_one_or_in_bulk(admin_client, tenant):
    delivery = _delivered(tenant)
    own = make_notification(tenant=tenant, next_fire_at=None)

    single = admin_client.post(f"{CHANGELIST}{delivery.pk}/delete/", {"post": "yes"})
    bulk = admin_client.post(
        CHANGELIST,
        {"action": "delete_selected", "_selected_action": [delivery.pk, own.pk], "post": "yes"},
    )

    assert single.status_code == 403
    assert bulk.status_code == 403
    assert Notification.objects.filter(pk__in=[delivery.pk, own.pk]).count() == 2
