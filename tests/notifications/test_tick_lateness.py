"""Lateness on the delivery log and in the tick summary, and skipped occurrences recorded."""

from datetime import UTC, datetime, timedelta

import pytest

from dbqueue.totals import worker_totals
from notifications.models import Delivery, DeliveryOutcome
from notifications.scheduler.deliver import Senders
from notifications.scheduler.plan import Policy, plan_poison
from notifications.scheduler.tick import run_tick
from notifications.scheduler.writeback import write_back
from notifications.transports.base import DeliveryResult
from tests.notifications.factories import make_endpoint, make_notification

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


def test_a_retry_is_late_from_the_occurrence_s_own_due_time(tenant, endpoint):
    row = make_notification(tenant=tenant, endpoint=endpoint, next_fire_at=DUE)

    run_tick(now=DUE + timedelta(seconds=2), senders=senders(failed))
    row.refresh_from_db()
    assert (row.next_fire_at, row.due_at) == (DUE + timedelta(seconds=62), DUE)
    summary = run_tick(now=row.next_fire_at, senders=senders())

    late = Delivery.objects.order_by("attempted_at").values_list("outcome", "late_ms")
    assert list(late) == [("failed", 2_000), ("delivered", 62_000)]
    assert summary.late_max_s == 62.0


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
    plan = plan_poison(
        row, token=row.claim_token + 1, now=DUE + 5 * MINUTE, policy=Policy(3, (60,))
    )
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
