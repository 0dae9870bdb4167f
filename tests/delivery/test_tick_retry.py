"""Backoff timings, Retry-After, timeouts and the stable webhook-id across retries."""

import threading
from datetime import UTC, datetime, timedelta

import pytest

from delivery.models import Delivery, DeliveryOutcome, NotificationState
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
from delivery.transports.base import DeliveryResult
from tests.delivery.factories import make_endpoint, make_notification
from tests.support.http_server import Reply, recording_server

pytestmark = pytest.mark.usefixtures("local_channels")

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


def test_full_failures_back_off_one_then_five_minutes_then_dead_letter(tenant):
    with recording_server(lambda r: Reply(500)) as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        row = make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=NOW)

        first = run_tick(now=NOW)
        row.refresh_from_db()
        assert (first.backed_off, row.error_count) == (1, 1)
        assert row.next_fire_at == NOW + timedelta(minutes=1)
        assert row.last_error == "webhook: HTTP 500"
        assert row.state == NotificationState.BACKING_OFF

        assert run_tick(now=NOW + timedelta(seconds=59)).claimed == 0
        second = NOW + timedelta(minutes=1)
        run_tick(now=second)
        row.refresh_from_db()
        assert row.error_count == 2
        assert row.next_fire_at == second + timedelta(minutes=5)

        third = run_tick(now=second + timedelta(minutes=5))
        assert len(server.received()) == 3
    row.refresh_from_db()
    assert third.dead_lettered == 1
    assert (row.next_fire_at, row.error_count, row.dead_letter_reason) == (None, 3, "exhausted")
    assert row.state == NotificationState.DEAD_LETTERED
    assert run_tick(now=NOW + timedelta(days=1)).claimed == 0


def test_retry_after_on_429_pushes_the_retry_at_least_that_far(tenant):
    # Backpressure: deferred to the time named, and no attempt used up.
    with recording_server(lambda r: Reply(429, headers={"Retry-After": "120"})) as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        row = make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=NOW, due_at=NOW)

        run_tick(now=NOW)

    row.refresh_from_db()
    assert row.next_fire_at >= NOW + timedelta(seconds=120)
    assert row.error_count == 0


def test_past_the_deferral_horizon_retry_after_still_pushes_the_retry(tenant, settings):
    settings.BACKPRESSURE_MAX_DEFER_SECONDS = 60
    with recording_server(lambda r: Reply(429, headers={"Retry-After": "120"})) as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        due = NOW - timedelta(minutes=5)
        row = make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=NOW, due_at=due)

        run_tick(now=NOW)

    row.refresh_from_db()
    assert row.next_fire_at >= NOW + timedelta(seconds=120)
    assert row.error_count == 1


def test_webhook_id_is_stable_across_retries_and_changes_with_the_occurrence(tenant):
    answers = iter([Reply(500), Reply(200), Reply(200)])
    with recording_server(lambda r: next(answers)) as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        row = make_notification(
            tenant=tenant, endpoint=endpoint, next_fire_at=NOW, rrule="FREQ=DAILY"
        )

        run_tick(now=NOW)
        run_tick(now=NOW + timedelta(minutes=1))
        run_tick(now=NOW + timedelta(days=1))

        ids = [request.headers["webhook-id"] for request in server.received()]
    assert ids == [f"notification_{row.pk}_1"] * 2 + [f"notification_{row.pk}_2"]


def test_hung_endpoint_is_cut_at_the_channel_timeout(tenant, settings):
    settings.CHANNEL_TIMEOUT_SECONDS = 0.5
    settings.CLAIM_LEASE_SECONDS = 6
    with recording_server(lambda r: Reply(200, delay=3)) as server:
        endpoint = make_endpoint(tenant=tenant, url=server.url)
        row = make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=NOW)

        summary = run_tick(now=NOW)

    assert summary.backed_off == 1
    log = Delivery.objects.get(notification_id=row.pk)
    assert (log.outcome, log.error_category, log.http_status) == (
        DeliveryOutcome.TIMEOUT,
        "timeout",
        None,
    )
    row.refresh_from_db()
    assert (row.error_count, row.last_error) == (1, "webhook: timeout")


def test_a_channel_that_ignores_its_timeout_is_cut_from_outside(tenant, settings):
    settings.CHANNEL_TIMEOUT_SECONDS = 0.2
    release = threading.Event()

    def stuck(message, *, timeout):
        release.wait(5)
        return DeliveryResult(ok=True)

    row = make_notification(
        tenant=tenant, next_fire_at=NOW, channels=("email",), email_to=("a@example.com",)
    )
    try:
        summary = run_tick(now=NOW, senders=Senders(email=stuck, webhook=stuck))
    finally:
        release.set()

    assert summary.backed_off == 1
    assert Delivery.objects.get(notification_id=row.pk).outcome == DeliveryOutcome.TIMEOUT
