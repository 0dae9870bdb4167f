"""Backpressure is not failure: a provider's "later" (429, 503 with Retry-After) defers the
channel to the time it named, without an attempt, until the deferral horizon."""

from datetime import UTC, datetime, timedelta

import pytest

from delivery.models import Delivery, DeliveryOutcome, Notification
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
from delivery.transports.base import DeliveryResult
from delivery.transports.resend import classify_resend_response
from delivery.transports.webhook import classify_response
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
URL = "https://hooks.example.com/in"


def answering(*results: DeliveryResult):
    """A sender that answers each call with the next result (the last one repeats)."""
    calls: list[str] = []

    def send(message, *, timeout):
        calls.append(getattr(message, "msg_id", None) or message.idempotency_key)
        return results[min(len(calls), len(results)) - 1]

    return send, calls


RATE_LIMITED = classify_response(429, {"Retry-After": "30"})
OK = DeliveryResult(ok=True, http_status=200)


@pytest.mark.parametrize(
    ("status", "headers", "backpressure"),
    [(429, {}, True), (503, {"Retry-After": "5"}, True), (503, {}, False), (500, {}, False)],
)
def test_which_webhook_answers_are_backpressure(status, headers, backpressure):
    assert classify_response(status, headers).backpressure is backpressure


@pytest.mark.parametrize(
    ("status", "name", "backpressure"),
    [
        (429, "rate_limit_exceeded", True),
        (409, "concurrent_idempotent_requests", True),
        (409, "invalid_idempotent_request", False),
        (422, "validation_error", False),
    ],
)
def test_which_resend_answers_are_backpressure(status, name, backpressure):
    body = f'{{"name": "{name}", "message": "x"}}'.encode()
    assert classify_resend_response(status, {}, body).backpressure is backpressure


def test_a_429_defers_the_webhook_to_the_time_named_without_an_attempt(db):
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url=URL)
    [row] = make_notifications(1, tenant=tenant, endpoint=endpoint, next_fire_at=NOW, due_at=NOW)
    send, calls = answering(RATE_LIMITED)

    summary = run_tick(now=NOW, senders=Senders(email=send, webhook=send))

    row.refresh_from_db()
    assert (summary.deferred, summary.backed_off, len(calls)) == (1, 0, 1)
    assert (row.next_fire_at, row.error_count, row.due_at) == (NOW + timedelta(seconds=30), 0, NOW)
    [log] = Delivery.objects.filter(notification_id=row.pk)
    assert (log.outcome, log.error_category) == (DeliveryOutcome.DEFERRED, "rate_limited")
    endpoint.refresh_from_db()
    assert endpoint.consecutive_failures == 0  # busy is not down


def test_ten_minutes_of_429_then_200_delivers_every_occurrence_once(db):
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url=URL)
    rows = make_notifications(5, tenant=tenant, endpoint=endpoint, next_fire_at=NOW, due_at=NOW)
    send, calls = answering(*[RATE_LIMITED] * 100, OK)

    for step in range(40):  # a tick every 30 s for 20 minutes
        run_tick(now=NOW + timedelta(seconds=30 * step), senders=Senders(email=send, webhook=send))

    delivered = Delivery.objects.filter(outcome=DeliveryOutcome.DELIVERED)
    assert sorted(delivered.values_list("notification_id", flat=True)) == sorted(
        row.pk for row in rows
    )
    assert set(Notification.objects.values_list("state", "next_fire_at")) == {("completed", None)}
    assert not Delivery.objects.filter(outcome=DeliveryOutcome.DEAD_LETTERED).exists()
    assert len(calls) == 100 + 5


def test_past_the_horizon_a_push_back_counts_and_dead_letters_as_rate_limited(db, settings):
    settings.BACKPRESSURE_MAX_DEFER_SECONDS = 3600
    settings.NOTIFICATION_MAX_ATTEMPTS = 1
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url=URL)
    due = NOW - timedelta(hours=1)
    [row] = make_notifications(1, tenant=tenant, endpoint=endpoint, next_fire_at=NOW, due_at=due)
    send, _ = answering(RATE_LIMITED)

    summary = run_tick(now=NOW, senders=Senders(email=send, webhook=send))

    row.refresh_from_db()
    assert summary.dead_lettered == 1
    assert (row.next_fire_at, row.dead_letter_reason) == (None, "rate_limited")
    dead = Delivery.objects.get(notification_id=row.pk, outcome=DeliveryOutcome.DEAD_LETTERED)
    assert dead.error_category == "rate_limited"
