"""Finished rows are kept as completed: readable through the API and the admin, filtered
by state, not retried, re-armed by a new schedule, and counted in no queue figure."""

from datetime import UTC, datetime, timedelta

import pytest

from delivery.models import Notification
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
from delivery.stats import notification_queue_stats
from delivery.transports.base import DeliveryResult
from tests.delivery.factories import make_endpoint, make_notification

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


def delivered(message, *, timeout):
    return DeliveryResult(ok=True, http_status=200)


SENDERS = Senders(email=delivered, webhook=delivered)


@pytest.fixture
def finished(alice):
    """A one-shot that run_tick delivered (so it is completed), in alice's tenant."""
    endpoint = make_endpoint(tenant=alice.tenant, url="http://127.0.0.1:9/unused")
    row = make_notification(tenant=alice.tenant, endpoint=endpoint, next_fire_at=NOW)
    assert run_tick(now=NOW, senders=SENDERS).delivered == 1
    return row


def test_a_delivered_one_shot_stays_readable_with_its_deliveries(alice, finished):
    path = f"/v1/notifications/{finished.id}"

    detail = alice.client().get(path)
    deliveries = alice.client().get(f"{path}/deliveries")

    assert detail.status_code == 200
    body = detail.json()
    assert (body["state"], body["next_fire_at"], body["occurrence"]) == ("completed", None, 1)
    assert body["last_fired_at"] is not None
    assert deliveries.status_code == 200
    assert [(d["outcome"], d["occurrence"]) for d in deliveries.json()["results"]] == [
        ("delivered", 1)
    ]


def test_a_rule_past_its_count_is_completed_and_readable(alice):
    row = make_notification(
        tenant=alice.tenant, channels=(), next_fire_at=NOW, rrule="FREQ=DAILY;COUNT=1"
    )
    run_tick(now=NOW, senders=SENDERS)

    body = alice.client().get(f"/v1/notifications/{row.id}").json()

    assert (body["state"], body["next_fire_at"]) == ("completed", None)


def test_the_state_filter_takes_completed(alice, finished):
    waiting = make_notification(tenant=alice.tenant, next_fire_at=NOW + timedelta(days=1))

    completed = alice.client().get("/v1/notifications?state=completed").json()["results"]
    scheduled = alice.client().get("/v1/notifications?state=scheduled").json()["results"]

    assert [n["id"] for n in completed] == [str(finished.id)]
    assert [n["id"] for n in scheduled] == [str(waiting.id)]


def test_retry_of_a_completed_row_is_409_and_touches_nothing(alice, finished):
    before = Notification.objects.get(pk=finished.pk)

    response = alice.client().post(f"/v1/notifications/{finished.id}/retry")

    assert response.status_code == 409
    assert response["Content-Type"] == "application/problem+json"
    assert "completed" in response.json()["detail"]
    after = Notification.objects.get(pk=finished.pk)
    assert (after.state, after.next_fire_at, after.claim_token) == (
        "completed",
        None,
        before.claim_token,
    )


@pytest.mark.parametrize(
    "change",
    [
        {"fire_at": "2031-05-01T09:00:00+00:00"},
        {"rrule": "FREQ=DAILY"},
        {"timezone": "Asia/Tokyo"},
        {"fire_at": "2031-05-01T09:00:00+00:00", "email_to": ["new@example.com"], "body": "x"},
    ],
)
def test_a_finished_one_shot_is_never_scheduled_again_by_a_patch(alice, finished, change):
    # Its send was counted once: sending it again is a new notification (and a new count).
    response = alice.client().patch(f"/v1/notifications/{finished.id}", change, format="json")

    assert response.status_code == 409
    assert response.json()["type"].endswith("/notification-completed")
    row = Notification.objects.get(pk=finished.pk)
    assert (row.state, row.next_fire_at, row.occurrence, row.rrule) == ("completed", None, 1, "")
    assert run_tick(now=NOW + timedelta(days=3650), senders=SENDERS).delivered == 0


def test_a_dead_lettered_one_shot_is_not_rescheduled_either(alice):
    row = make_notification(
        tenant=alice.tenant, next_fire_at=None, error_count=3, dead_letter_reason="exhausted"
    )

    response = alice.client().patch(
        f"/v1/notifications/{row.id}", {"fire_at": "2031-05-01T09:00:00+00:00"}, format="json"
    )

    assert response.status_code == 409
    assert Notification.objects.get(pk=row.pk).state == "dead_lettered"


def test_removing_the_rule_of_a_recurring_row_that_fired_finishes_its_schedule(alice):
    endpoint = make_endpoint(tenant=alice.tenant, url="http://127.0.0.1:9/unused")
    row = make_notification(
        tenant=alice.tenant, endpoint=endpoint, next_fire_at=NOW, rrule="FREQ=DAILY"
    )
    assert run_tick(now=NOW, senders=SENDERS).delivered == 1

    response = alice.client().patch(f"/v1/notifications/{row.id}", {"rrule": ""}, format="json")

    assert response.status_code == 200
    assert (response.json()["state"], response.json()["next_fire_at"]) == ("completed", None)
    assert Notification.objects.get(pk=row.pk).occurrence == 2  # the next, never sent
    # Nothing more goes out: no "occurrence 2" dated before occurrence 1.
    assert run_tick(now=NOW + timedelta(minutes=1), senders=SENDERS).delivered == 0


def test_a_content_change_leaves_a_completed_row_completed(alice, finished):
    response = alice.client().patch(
        f"/v1/notifications/{finished.id}", {"body": "corrected"}, format="json"
    )

    assert response.status_code == 200
    assert (response.json()["state"], response.json()["next_fire_at"]) == ("completed", None)
    assert Notification.objects.get(pk=finished.pk).body == "corrected"


def test_queue_figures_count_no_completed_or_parked_row(alice, finished):
    make_notification(tenant=alice.tenant, next_fire_at=None)  # parked
    make_notification(
        tenant=alice.tenant, next_fire_at=None, error_count=3, dead_letter_reason="exhausted"
    )

    stats = notification_queue_stats(now=NOW + timedelta(hours=1))

    assert (stats["due"], stats["backing_off"], stats["dead_lettered"]) == (0, 0, 1)
    assert stats["in_flight"] == 0


def test_the_admin_lists_completed_rows_and_names_them_in_the_delivery_log(admin_client, finished):
    listed = admin_client.get("/admin/delivery/notification/", {"state": "completed"})
    log = admin_client.get("/admin/delivery/delivery/").content.decode()

    assert [n.pk for n in listed.context["cl"].result_list] == [finished.pk]
    link = f'<a href="/admin/delivery/notification/{finished.id}/change/">Standup</a>'
    assert link in log
    assert "(deleted)" not in log
