"""notifications.services (and the checks of delivery.validation they apply): the
rules every caller (API, admin, producers) goes through. The webhook endpoints' own are in
tests/webhooks/test_endpoints.py."""

from datetime import UTC, datetime, timedelta

import pytest

from dbqueue.fences import fenced_update
from delivery import conflicts, outbox
from delivery.models import Notification
from notifications import services
from tests.delivery.factories import make_notification, make_tenant

NOW = datetime(2030, 3, 4, 12, 0, tzinfo=UTC)


def _email(tenant, **fields):
    defaults = {"next_fire_at": NOW, "channels": ["email"], "email_to": ["a@example.com"]}
    return make_notification(tenant=tenant, **{**defaults, **fields})


def test_create_anchors_the_schedule_at_fire_at(tenant):
    fire_at = NOW + timedelta(hours=1)

    created = services.notification_create(
        tenant=tenant,
        channels=["email"],
        email_to=["a@example.com"],
        subject="S",
        fire_at=fire_at,
        rrule="FREQ=HOURLY",
        now=NOW,
    )

    row = Notification.objects.get(pk=created.pk)
    assert (row.next_fire_at, row.recurrence_anchor, row.occurrence) == (fire_at, fire_at, 1)
    assert row.state == "scheduled"


def test_create_reports_every_broken_rule_at_once(tenant):
    with pytest.raises(services.InvalidInput) as caught:
        services.notification_create(
            tenant=tenant,
            channels=["email", "webhook"],
            email_to=[],
            subject="S",
            rrule="FREQ=NEVER",
            timezone="Nowhere/City",
        )

    assert set(caught.value.errors) == {"email_to", "webhook_endpoint", "rrule", "timezone"}
    assert "Nowhere/City" in caught.value.errors["timezone"][0]


def test_create_validates_addresses_for_internal_callers_too(tenant):
    with pytest.raises(services.InvalidInput) as caught:
        services.notification_create(
            tenant=tenant, channels=["email"], email_to=["nope"], subject="S"
        )

    assert "email_to" in caught.value.errors


def test_update_bumps_the_fence_so_a_stale_worker_cannot_overwrite_it(tenant):
    notification = _email(tenant, claim_token=3, claimed_until=NOW - timedelta(seconds=1))

    services.notification_update(
        tenant=tenant, notification_id=notification.id, changes={"subject": "New"}, now=NOW
    )

    assert not fenced_update(Notification, pk=notification.pk, token=3, error_count=1)
    row = Notification.objects.get(pk=notification.pk)
    assert (row.subject, row.error_count, row.claim_token) == ("New", 0, 4)


def test_update_racing_a_claim_is_a_conflict(tenant):
    notification = _email(tenant)
    stale = Notification.objects.get(pk=notification.pk)
    Notification.objects.filter(pk=notification.pk).update(claim_token=9, claimed_until=None)

    with pytest.raises(conflicts.NotificationClaimed):
        services._guarded_update(stale, values={"subject": "X"}, now=NOW)

    assert Notification.objects.get(pk=notification.pk).subject == "Standup"


def test_schedule_change_clears_the_error_state_and_keeps_the_occurrence(tenant):
    notification = _email(tenant, next_fire_at=None, error_count=3, occurrence=4)  # parked

    updated = services.notification_update(
        tenant=tenant, notification_id=notification.id, changes={"timezone": "Asia/Tokyo"}, now=NOW
    )

    assert updated.next_fire_at == updated.recurrence_anchor == NOW
    assert (updated.state, updated.occurrence, updated.timezone) == ("scheduled", 4, "Asia/Tokyo")


def test_another_tenants_row_is_missing(tenant):
    notification = _email(make_tenant("Other"))

    with pytest.raises(Notification.DoesNotExist):
        services.notification_retry(tenant=tenant, notification_id=notification.id, now=NOW)
    with pytest.raises(Notification.DoesNotExist):
        services.notification_delete(tenant=tenant, notification_id=notification.id)
    assert Notification.objects.filter(pk=notification.pk).exists()


def test_unpark_makes_a_one_shot_due_now(tenant):
    notification = _email(tenant, next_fire_at=None, error_count=3, last_error="boom")

    row = services.notification_unpark(tenant=tenant, notification_id=notification.id, now=NOW)

    assert (row.state, row.next_fire_at, row.error_count, row.last_error) == (
        "scheduled",
        NOW,
        0,
        None,
    )


def test_unpark_resumes_a_recurring_row_at_its_next_occurrence(tenant):
    notification = _email(
        tenant,
        next_fire_at=NOW - timedelta(days=3),
        error_count=99,
        rrule="FREQ=DAILY",
        recurrence_anchor=datetime(2030, 1, 1, 9, tzinfo=UTC),
        occurrence=5,
    )

    row = services.notification_unpark(tenant=tenant, notification_id=notification.id, now=NOW)

    assert row.next_fire_at == datetime(2030, 3, 5, 9, tzinfo=UTC)
    assert (row.occurrence, row.error_count, row.state) == (6, 0, "scheduled")


def test_unpark_refuses_rows_that_are_not_parked(tenant):
    notification = _email(tenant)

    with pytest.raises(conflicts.NotificationNotParked):
        services.notification_unpark(tenant=tenant, notification_id=notification.id, now=NOW)


def test_unpark_of_a_finished_schedule_is_refused(tenant):
    notification = _email(
        tenant,
        next_fire_at=None,
        dead_letter_reason="crashed",
        rrule="FREQ=DAILY;COUNT=2",
        recurrence_anchor=NOW - timedelta(days=9),
    )

    with pytest.raises(conflicts.ScheduleFinished):
        services.notification_unpark(tenant=tenant, notification_id=notification.id, now=NOW)


def test_every_start_of_an_occurrence_sets_its_due_time(tenant):
    old = NOW - timedelta(days=9)
    created = services.notification_create(
        tenant=tenant, channels=["email"], email_to=["a@example.com"], subject="S", now=NOW
    )
    assert created.due_at == NOW

    moved = services.notification_update(
        tenant=tenant,
        notification_id=_email(tenant, due_at=old).id,
        changes={"fire_at": NOW + timedelta(hours=2)},
        now=NOW,
    )
    assert moved.due_at == moved.next_fire_at == NOW + timedelta(hours=2)

    retried = services.notification_retry(
        tenant=tenant, notification_id=_email(tenant, due_at=old, error_count=1).id, now=NOW
    )
    assert retried.due_at == NOW

    parked = _email(
        tenant,
        next_fire_at=None,
        due_at=old,
        rrule="FREQ=DAILY",
        recurrence_anchor=datetime(2030, 1, 1, 9, tzinfo=UTC),
    )
    resumed = services.notification_unpark(tenant=tenant, notification_id=parked.id, now=NOW)
    assert resumed.due_at == resumed.next_fire_at == datetime(2030, 3, 5, 9, tzinfo=UTC)


def test_announced_rows_are_due_now(tenant):
    announcement = outbox.Announcement(
        addresses=["a@example.com"],
        email_subject="Welcome",
        email_body="",
        event={"type": "project.active", "data": {}},
    )

    outbox.announce([outbox.Announced(tenant.id, None, "k", announcement)], now=NOW)

    assert list(Notification.objects.values_list("due_at", "next_fire_at")) == [(NOW, NOW)]
