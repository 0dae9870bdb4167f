"""run_tick write-back branches against a real local webhook receiver (and locmem email)."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks import Webhook

from delivery.models import (
    Delivery,
    DeliveryOutcome,
    Notification,
    NotificationState,
    WebhookEndpoint,
)
from delivery.scheduler.tick import run_tick
from tests.delivery.factories import make_endpoint, make_notification
from tests.support.http_server import Reply, recording_server

pytestmark = pytest.mark.usefixtures("local_channels", "local_mail")

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
DAILY = "FREQ=DAILY"


def test_one_shot_success_completes_the_row_and_logs_the_delivery(tenant):
    with recording_server() as server:
        endpoint = make_endpoint(tenant=tenant, url=f"{server.url}/hook")
        row = make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=NOW)

        summary = run_tick(now=NOW)

        [request] = server.received("/hook")
    assert (summary.claimed, summary.delivered) == (1, 1)
    row.refresh_from_db()
    assert (row.state, row.next_fire_at, row.claimed_until) == ("completed", None, None)
    assert (row.occurrence, row.due_at, row.last_fired_at) == (1, NOW, NOW)
    assert (row.error_count, row.last_error) == (0, None)
    [log] = Delivery.objects.filter(notification_id=row.pk)
    assert (log.channel, log.outcome, log.http_status) == ("webhook", "delivered", 200)
    assert (log.occurrence, log.tenant_id, log.attempted_at) == (1, tenant.id, NOW)
    event = Webhook(endpoint.secret).verify(request.body, request.headers)
    assert request.headers["webhook-id"] == f"notification_{row.pk}_1"
    assert event["type"] == "notification.fired"
    assert event["data"]["notification_id"] == str(row.pk)
    assert event["data"]["scheduled_for"] == "2025-03-03T09:00:00Z"


def test_recurring_success_advances_to_the_next_occurrence(tenant):
    with recording_server() as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        row = make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=NOW, rrule=DAILY)

        run_tick(now=NOW)

    row.refresh_from_db()
    assert row.next_fire_at == NOW + timedelta(days=1)
    assert (row.occurrence, row.error_count, row.last_error) == (2, 0, None)
    assert row.last_fired_at == NOW
    assert (row.claimed_until, row.unfinished_claims) == (None, 0)


def test_custom_event_is_sent_as_set_by_its_producer(tenant):
    event = {"type": "project.invited", "data": {"project_id": "p1"}}
    with recording_server() as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=NOW, webhook_event=event)

        run_tick(now=NOW)

        [request] = server.received()
    body = json.loads(request.body)
    assert (body["type"], body["data"]) == ("project.invited", {"project_id": "p1"})


def test_partial_success_on_recurring_advances_without_retry(tenant, settings):
    settings.RESEND_API_KEY = "re_test_key"
    with recording_server(lambda r: Reply(500)) as resend, recording_server() as hook:
        settings.RESEND_API_URL = resend.url
        endpoint = make_endpoint(tenant=tenant, url=hook.url)
        row = make_notification(
            tenant=tenant,
            endpoint=endpoint,
            next_fire_at=NOW,
            rrule=DAILY,
            channels=("email", "webhook"),
            email_to=("a@example.com",),
        )

        summary = run_tick(now=NOW)
        run_tick(now=NOW + timedelta(minutes=5))

        assert len(hook.received()) == 1
    assert summary.partial == 1
    row.refresh_from_db()
    assert (row.last_error, row.error_count, row.occurrence) == ("partial: email", 0, 2)
    assert row.next_fire_at == NOW + timedelta(days=1)
    outcomes = dict(Delivery.objects.values_list("channel", "outcome"))
    assert outcomes == {"email": "failed", "webhook": "delivered"}


def test_email_goes_through_the_configured_backend(tenant, mailoutbox):
    row = make_notification(
        tenant=tenant, next_fire_at=NOW, channels=("email",), email_to=("a@example.com",)
    )

    summary = run_tick(now=NOW)

    assert summary.delivered == 1
    [message] = mailoutbox
    assert (message.to, message.subject) == (["a@example.com"], "Standup")
    assert Notification.objects.values_list("state", "next_fire_at").get(pk=row.pk) == (
        "completed",
        None,
    )


def test_permanent_4xx_dead_letters_at_once(tenant):
    with recording_server(lambda r: Reply(404)) as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        row = make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=NOW)

        summary = run_tick(now=NOW)

    assert summary.dead_lettered == 1
    row.refresh_from_db()
    assert row.state == NotificationState.DEAD_LETTERED
    assert (row.dead_letter_reason, row.error_count) == ("permanent", 1)
    assert row.last_error == "webhook: HTTP 404"
    dead = Delivery.objects.get(outcome=DeliveryOutcome.DEAD_LETTERED)
    assert dead.error_category == "permanent"


def test_gone_endpoint_is_disabled(tenant):
    with recording_server(lambda r: Reply(410)) as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=NOW)

        run_tick(now=NOW)

    endpoint.refresh_from_db()
    assert endpoint.enabled is False
    assert "410" in endpoint.disabled_reason


def test_disabled_endpoint_fails_permanently_without_a_request(tenant):
    with recording_server() as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url, enabled=False)
        row = make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=NOW)

        run_tick(now=NOW)

        assert server.received() == []
    row.refresh_from_db()
    assert row.dead_letter_reason == "permanent"
    log = Delivery.objects.get(channel="webhook")
    assert (log.outcome, log.error_category) == ("failed", "endpoint_disabled")
    assert WebhookEndpoint.objects.filter(pk=endpoint.pk, enabled=False).exists()


def test_recurring_dead_letter_skips_to_the_next_occurrence(tenant):
    with recording_server(lambda r: Reply(500)) as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        row = make_notification(
            tenant=tenant, endpoint=endpoint, next_fire_at=NOW, rrule=DAILY, error_count=2
        )

        summary = run_tick(now=NOW)

    assert summary.dead_lettered == 1
    row.refresh_from_db()
    assert row.next_fire_at == NOW + timedelta(days=1)
    assert (row.occurrence, row.error_count, row.dead_letter_reason) == (2, 0, "")
    assert row.last_error == "webhook: HTTP 500"
    assert row.state == NotificationState.SCHEDULED
    dead = Delivery.objects.get(outcome=DeliveryOutcome.DEAD_LETTERED)
    assert (dead.occurrence, dead.error_category) == (1, "exhausted")


def test_unexpected_error_leaves_the_row_claimed_and_the_tick_continues(
    tenant, caplog, monkeypatch
):
    def broken_schedule(**_):
        raise RuntimeError("unexpected")

    monkeypatch.setattr("delivery.scheduler.plan.next_and_skipped", broken_schedule)
    with recording_server() as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        broken = make_notification(
            tenant=tenant, endpoint=endpoint, next_fire_at=NOW, rrule="FREQ=DAILY"
        )
        fine = make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=NOW)

        summary = run_tick(now=NOW)

    assert (summary.claimed, summary.delivered, summary.errors) == (2, 1, 1)
    assert Notification.objects.values_list("state", "next_fire_at").get(pk=fine.pk) == (
        "completed",
        None,
    )
    broken.refresh_from_db()
    assert broken.claimed_until is not None
    assert f"row {broken.pk}: unexpected" in caplog.text
