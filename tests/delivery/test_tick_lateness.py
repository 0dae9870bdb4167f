"""Lateness on the delivery log and in the tick summary, and skipped occurrences recorded."""

from datetime import UTC, datetime, timedelta

import pytest

from dbqueue.totals import worker_totals
from delivery.models import Delivery, DeliveryOutcome, Notification, WebhookEndpoint
from delivery.scheduler.deliver import Senders
from delivery.scheduler.plan import Policy, plan_crashed
from delivery.scheduler.tick import run_tick
from delivery.scheduler.writeback import write_back
from delivery.transports.base import DeliveryResult
from delivery.transports.webhook import classify_response
from operations.queue_health import hourly_lateness
from tests.delivery.factories import make_endpoint, make_notification

DUE = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def delivered(message, *, timeout):
    return DeliveryResult(ok=True, http_status=200)


def failed(message, *, timeout):
    return DeliveryResult(ok=False, error="HTTP 500", category="http_5xx", http_status=500)


def rejected(message, *, timeout):
    return DeliveryResult(
        ok=False, error="HTTP 400", permanent=True, category="http_4xx", http_status=400
    )


RATE_LIMITED = classify_response(429, {"Retry-After": "30"})


def senders(webhook=delivered):
    return Senders(email=delivered, webhook=webhook)


@pytest.fixture
def endpoint(tenant):
    return make_endpoint(tenant=tenant, url="http://127.0.0.1:9/unused")


def minutely(tenant, endpoint, **fields):
    return make_notification(
        tenant=tenant, endpoint=endpoint, next_fire_at=DUE, rrule="FREQ=MINUTELY", **fields
    )


def test_a_minutely_row_handled_late_records_what_it_skipped(tenant, endpoint):
    row = minutely(tenant, endpoint)
    now = DUE + timedelta(minutes=9, seconds=30)

    summary = run_tick(now=now, senders=senders())

    [attempt] = Delivery.objects.filter(outcome=DeliveryOutcome.DELIVERED)
    [skipped] = Delivery.objects.filter(outcome=DeliveryOutcome.SKIPPED)
    assert attempt.late_ms == 570_000
    assert (skipped.channel, skipped.occurrence, skipped.late_ms) == ("", 1, None)
    assert (skipped.skipped_count, skipped.skipped_first, skipped.skipped_last) == (
        9,
        DUE + MINUTE,
        DUE + 9 * MINUTE,
    )
    assert (summary.skipped, summary.late_max_s) == (9, 570.0)
    assert " skipped=9 " in summary.line()
    assert " late_max_s=570.000 " in summary.line()
    row.refresh_from_db()
    assert row.next_fire_at == row.due_at == DUE + 10 * MINUTE


def test_handled_exactly_ten_minutes_late_the_tenth_minute_is_skipped_too(tenant, endpoint):
    minutely(tenant, endpoint)

    summary = run_tick(now=DUE + 10 * MINUTE, senders=senders())

    skipped = Delivery.objects.get(outcome=DeliveryOutcome.SKIPPED)
    assert (skipped.skipped_count, skipped.skipped_last) == (10, DUE + 10 * MINUTE)
    assert summary.skipped == 10


def test_a_row_on_time_skips_nothing(tenant, endpoint):
    minutely(tenant, endpoint)

    summary = run_tick(now=DUE + timedelta(seconds=20), senders=senders())

    assert not Delivery.objects.filter(outcome=DeliveryOutcome.SKIPPED).exists()
    assert (summary.skipped, summary.late_max_s) == (0, 20.0)


def test_a_retry_is_late_from_the_end_of_its_backoff_not_from_the_occurrence(tenant, endpoint):
    row = make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=DUE)

    run_tick(now=DUE + timedelta(seconds=2), senders=senders(failed))
    row.refresh_from_db()
    assert (row.next_fire_at, row.due_at) == (DUE + timedelta(seconds=62), DUE)
    summary = run_tick(now=row.next_fire_at + timedelta(seconds=3), senders=senders())

    late = Delivery.objects.order_by("attempted_at").values_list("outcome", "late_ms")
    assert list(late) == [("failed", 2_000), ("delivered", 3_000)]
    assert summary.late_max_s == 3.0


def test_retries_on_time_are_on_time_however_long_ago_the_occurrence_was_due(
    tenant, endpoint, settings
):
    settings.NOTIFICATION_MAX_ATTEMPTS = 3
    settings.BACKOFF_SECONDS = (60, 300, 1800)
    row = make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=DUE)
    late_max = []
    for webhook in (failed, failed, delivered):
        at = Notification.objects.get(pk=row.pk).next_fire_at + timedelta(seconds=1)
        late_max.append(run_tick(now=at, senders=senders(webhook)).late_max_s)

    # The third attempt went 6 minutes after the occurrence was due, 1 s after its backoff.
    attempts = Delivery.objects.order_by("attempted_at").values_list("attempted_at", "late_ms")
    assert list(attempts) == [
        (DUE + timedelta(seconds=1), 1_000),
        (DUE + timedelta(seconds=62), 1_000),
        (DUE + timedelta(seconds=363), 1_000),
    ]
    assert late_max == [1.0, 1.0, 1.0]
    health = hourly_lateness(now=DUE + timedelta(seconds=363))
    assert health.quantiles[-1] == {"p50": 1.0, "p99": 1.0}


def test_a_deferred_channel_is_late_from_the_end_of_its_deferral(tenant, endpoint):
    open_until = DUE + timedelta(minutes=4)
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        consecutive_failures=5, circuit_open_until=open_until, circuit_interval_seconds=240
    )
    make_notification(
        tenant=tenant,
        endpoint=endpoint,
        next_fire_at=DUE,
        channels=("email", "webhook"),
        email_to=("ann@example.com",),
    )
    first = run_tick(now=DUE + timedelta(seconds=1), senders=senders())
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(circuit_open_until=DUE)

    second = run_tick(now=open_until + timedelta(seconds=2), senders=senders())

    attempts = Delivery.objects.exclude(outcome=DeliveryOutcome.DEFERRED)
    late = attempts.order_by("attempted_at").values_list("channel", "late_ms")
    assert list(late) == [("email", 1_000), ("webhook", 2_000)]
    assert (first.late_max_s, second.late_max_s) == (1.0, 2.0)


def test_a_provider_s_later_is_late_from_the_time_it_named(tenant, endpoint):
    row = make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=DUE)
    run_tick(now=DUE, senders=senders(lambda message, *, timeout: RATE_LIMITED))
    row.refresh_from_db()
    assert row.next_fire_at == DUE + timedelta(seconds=30)

    summary = run_tick(now=row.next_fire_at + timedelta(seconds=4), senders=senders())

    delivered = Delivery.objects.get(outcome=DeliveryOutcome.DELIVERED)
    assert (delivered.late_ms, summary.late_max_s) == (4_000, 4.0)


def test_a_recurring_dead_letter_records_its_skips_and_starts_the_next_occurrence(tenant, endpoint):
    row = minutely(tenant, endpoint)

    summary = run_tick(now=DUE + timedelta(minutes=3, seconds=1), senders=senders(rejected))

    outcomes = set(Delivery.objects.values_list("outcome", "skipped_count"))
    assert outcomes == {("failed", 0), ("dead_lettered", 0), ("skipped", 3)}
    assert (summary.dead_lettered, summary.skipped) == (1, 3)
    row.refresh_from_db()
    assert row.next_fire_at == row.due_at == DUE + 4 * MINUTE


def test_a_fenced_out_row_records_its_attempt_but_no_skip(tenant, endpoint):
    row = minutely(tenant, endpoint, unfinished_claims=9)
    plan = plan_crashed(row, token=row.claim_token + 1, now=DUE + 5 * MINUTE, policy=Policy((60,)))
    assert plan.skipped is not None

    fenced = write_back([plan], now=DUE + 5 * MINUTE)

    assert fenced == [plan]
    assert list(Delivery.objects.values_list("outcome", flat=True)) == ["dead_lettered"]


def test_the_tick_adds_its_lateness_histogram_to_the_totals(tenant, endpoint):
    for late in (timedelta(0), timedelta(seconds=10), timedelta(seconds=200)):
        make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=DUE - late)

    run_tick(now=DUE, senders=senders())

    totals = {name: n for name, (n, _) in worker_totals()["run_tick"].items()}
    lateness = {name: n for name, n in totals.items() if name.startswith("lateness_")}
    assert lateness == {
        "lateness_le_1": 1,
        "lateness_le_15": 1,
        "lateness_le_300": 1,
        "lateness_sum_ms": 210_000,
    }
