"""notifications.services (and the checks of notifications.validation they apply): the
rules every caller (API, admin, producers) goes through."""

import socket
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from dbqueue.fences import fenced_update
from dbqueue.models import ConcurrencySlot
from notifications import announcements, conflicts, services, webhook_endpoints
from notifications.models import Notification, WebhookEndpoint
from tests.conftest import requires_postgres
from tests.notifications.factories import make_endpoint, make_notification, make_tenant

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
    notification = _email(
        tenant, next_fire_at=None, error_count=3, dead_letter_reason="permanent", occurrence=4
    )

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


def test_disabling_an_endpoint_records_why(tenant, monkeypatch):
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: pytest.fail("no DNS expected"))
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/")

    webhook_endpoints.webhook_endpoint_update(
        tenant=tenant, endpoint_id=endpoint.id, enabled=False, disabled_reason="by support"
    )

    row = WebhookEndpoint.objects.get(pk=endpoint.pk)
    assert (row.enabled, row.disabled_reason, row.url) == (False, "by support", endpoint.url)


def test_a_second_rotation_within_the_grace_keeps_both_retired_secrets_signing(tenant, settings):
    settings.WEBHOOK_SECRET_GRACE_SECONDS = 60
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/")

    first = webhook_endpoints.webhook_endpoint_rotate_secret(
        tenant=tenant, endpoint_id=endpoint.id, now=NOW
    )
    second = webhook_endpoints.webhook_endpoint_rotate_secret(
        tenant=tenant, endpoint_id=endpoint.id, now=NOW + timedelta(seconds=10)
    )

    row = WebhookEndpoint.objects.get(pk=endpoint.pk)
    assert len({endpoint.secret, first.secret, second.secret}) == 3
    # Each retired secret keeps its own grace: the original until 60 s after the first
    # rotation, the first rotation's until 60 s after the second.
    assert row.signing_secrets(now=NOW + timedelta(seconds=59)) == [
        second.secret,
        first.secret,
        endpoint.secret,
    ]
    assert row.signing_secrets(now=NOW + timedelta(seconds=60)) == [second.secret, first.secret]
    assert row.signing_secrets(now=NOW + timedelta(seconds=70)) == [second.secret]


def test_a_rotation_after_the_grace_drops_the_secrets_whose_grace_ended(tenant, settings):
    settings.WEBHOOK_SECRET_GRACE_SECONDS = 60
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/")
    first = webhook_endpoints.webhook_endpoint_rotate_secret(
        tenant=tenant, endpoint_id=endpoint.id, now=NOW
    )

    second = webhook_endpoints.webhook_endpoint_rotate_secret(
        tenant=tenant, endpoint_id=endpoint.id, now=NOW + timedelta(seconds=61)
    )

    row = WebhookEndpoint.objects.get(pk=endpoint.pk)
    assert [entry["secret"] for entry in row.retired_secrets] == [first.secret]
    assert row.signing_secrets(now=NOW + timedelta(seconds=62)) == [second.secret, first.secret]


def test_rotating_faster_than_the_grace_keeps_the_last_retired_secrets(tenant, settings):
    settings.WEBHOOK_SECRET_GRACE_SECONDS = 3600
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/")
    shown = [endpoint.secret]
    for second in range(webhook_endpoints.MAX_RETIRED_SECRETS + 2):
        rotated = webhook_endpoints.webhook_endpoint_rotate_secret(
            tenant=tenant, endpoint_id=endpoint.id, now=NOW + timedelta(seconds=second)
        )
        shown.append(rotated.secret)

    row = WebhookEndpoint.objects.get(pk=endpoint.pk)
    signing = row.signing_secrets(now=NOW + timedelta(minutes=1))
    assert signing == shown[::-1][: webhook_endpoints.MAX_RETIRED_SECRETS + 1]


def test_deleting_an_endpoint_detaches_its_notifications(tenant):
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/")
    notification = make_notification(tenant=tenant, next_fire_at=timezone.now(), endpoint=endpoint)

    other = make_endpoint(tenant=tenant, url="https://hooks.example.com/other")
    for one in (endpoint, other):
        ConcurrencySlot.objects.create(scope=webhook_endpoints.slot_scope(one.id), slot=0)

    webhook_endpoints.webhook_endpoint_delete(tenant=tenant, endpoint_id=endpoint.id)

    assert Notification.objects.get(pk=notification.pk).webhook_endpoint_id is None
    # Its delivery slots go with it; another endpoint's stay.
    scopes = set(ConcurrencySlot.objects.values_list("scope", flat=True))
    assert scopes == {webhook_endpoints.slot_scope(other.id)}
    with pytest.raises(WebhookEndpoint.DoesNotExist):
        webhook_endpoints.webhook_endpoint_delete(tenant=tenant, endpoint_id=endpoint.id)


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_rotations_take_turns_so_every_shown_secret_was_stored():
    endpoint = make_endpoint(tenant=make_tenant(), url="https://hooks.example.com/")
    barrier = threading.Barrier(2)
    shown: list[str] = []

    def rotate() -> None:
        try:
            barrier.wait(timeout=10)
            rotated = webhook_endpoints.webhook_endpoint_rotate_secret(
                tenant=endpoint.tenant, endpoint_id=endpoint.id
            )
            shown.append(rotated.secret)
        finally:
            connection.close()

    threads = [threading.Thread(target=rotate) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    row = WebhookEndpoint.objects.get(pk=endpoint.pk)
    assert len(shown) == 2
    # Both shown secrets sign (the one rotated first is now in its grace), whichever
    # rotation committed last.
    assert set(row.signing_secrets(now=timezone.now())[:2]) == set(shown)


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_an_update_racing_a_delete_finds_the_endpoint_missing_instead_of_failing():
    endpoint = make_endpoint(tenant=make_tenant(), url="https://hooks.example.com/")
    deleted_under_lock = threading.Event()
    outcome: list[str] = []

    def update() -> None:
        try:
            deleted_under_lock.wait(timeout=10)
            webhook_endpoints.webhook_endpoint_update(
                tenant=endpoint.tenant, endpoint_id=endpoint.id, enabled=False
            )
            outcome.append("updated")
        except WebhookEndpoint.DoesNotExist:
            outcome.append("missing")
        finally:
            connection.close()

    updater = threading.Thread(target=update)
    updater.start()
    with transaction.atomic():
        WebhookEndpoint.objects.filter(pk=endpoint.pk).delete()
        deleted_under_lock.set()
        updater.join(timeout=0.5)  # the update now waits on the deleted row's lock
    updater.join(timeout=30)

    assert outcome == ["missing"]
    assert not WebhookEndpoint.objects.filter(pk=endpoint.pk).exists()


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
    announcement = announcements.Announcement(
        addresses=["a@example.com"],
        email_subject="Welcome",
        email_body="",
        event={"type": "project.activated", "data": {}},
        event_subject="activated",
    )

    announcements.notifications_announce(
        [announcements.Announced(tenant.id, None, "k", announcement)], now=NOW
    )

    assert list(Notification.objects.values_list("due_at", "next_fire_at")) == [(NOW, NOW)]
