"""Real ticks against the fake Resend on 127.0.0.1: its token bucket, its idempotency keys and
its count of emails actually sent tell whether every email went exactly once."""

from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.models import Delivery, DeliveryOutcome, Notification
from delivery.scheduler.tick import run_tick
from tests.conftest import requires_postgres
from tests.delivery.factories import make_notifications, make_tenant
from tests.support.concurrency import run_together
from tests.support.fake_resend import ManualClock, fake_resend


@pytest.fixture
def resend(settings):
    with fake_resend(rate=2) as fake:
        settings.RESEND_API_KEY = fake.api_key
        settings.RESEND_API_URL = fake.url
        settings.RESEND_RATE_LIMIT = 2
        yield fake


def due_emails(count: int, *, addresses=None) -> list[Notification]:
    now = timezone.now()
    rows = make_notifications(count, tenant=make_tenant(), channels=["email"], next_fire_at=now)
    for i, row in enumerate(rows):
        row.email_to = [addresses[i] if addresses else f"user{i}@example.com"]
    Notification.objects.bulk_update(rows, ["email_to"])
    return rows


def make_due_again() -> None:
    Notification.objects.update(next_fire_at=timezone.now() - timedelta(seconds=1))


def test_300_due_emails_go_in_the_first_tick_with_no_429_and_no_duplicate(db, resend):
    due_emails(300)

    summary = run_tick()

    assert (summary.delivered, summary.dead_lettered, summary.deferred) == (300, 0, 0)
    assert (len(resend.sent), resend.duplicates(), resend.answered(429)) == (300, {}, 0)
    assert len(resend.requests) == 3
    assert {r.path for r in resend.requests} == {"/emails/batch"}
    assert set(Notification.objects.values_list("state", "next_fire_at")) == {("completed", None)}


def test_an_answer_lost_after_sending_is_replayed_not_sent_again(db, resend):
    due_emails(5)
    resend.fail_next(1, status=500, after_processing=True)

    first = run_tick()
    assert (first.backed_off, len(resend.sent)) == (5, 5)  # sent, but we could not know
    make_due_again()
    second = run_tick()

    assert second.delivered == 5
    assert (len(resend.sent), resend.duplicates()) == (5, {})
    keys = [r.headers["idempotency-key"] for r in resend.requests]
    assert keys[0] == keys[1]
    assert resend.requests[0].body == resend.requests[1].body
    assert set(Notification.objects.values_list("state", "next_fire_at")) == {("completed", None)}


def test_a_malformed_address_fails_that_email_alone(db, resend):
    rows = due_emails(3, addresses=["ada@example.com", "not an address", "bob@example.com"])

    summary = run_tick()

    assert (summary.delivered, summary.dead_lettered) == (2, 1)
    assert sorted(resend.sent_to) == ["ada@example.com", "bob@example.com"]
    [parked] = Notification.objects.exclude(state="completed")
    assert (parked.pk, parked.dead_letter_reason) == (rows[1].pk, "permanent")
    [log] = Delivery.objects.filter(notification_id=parked.pk, channel="email")
    assert (log.outcome, log.error_category) == (DeliveryOutcome.FAILED, "invalid_request")


def test_a_provider_refusing_for_a_while_defers_then_sends_each_email_once(db, settings):
    clock = ManualClock(1000.0)
    with fake_resend(rate=2, clock=clock) as resend:
        settings.RESEND_API_KEY = resend.api_key
        settings.RESEND_API_URL = resend.url
        resend.refuse_until(1300.0, retry_after=1)  # five minutes of 429
        due_emails(4)

        refused = run_tick()
        clock.advance(300)
        make_due_again()
        recovered = run_tick()

    assert (refused.deferred, refused.backed_off, refused.dead_lettered) == (4, 0, 0)
    assert recovered.delivered == 4
    assert (len(resend.sent), resend.duplicates()) == (4, {})
    assert not Delivery.objects.filter(outcome=DeliveryOutcome.DEAD_LETTERED).exists()


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_overlapping_ticks_send_each_email_exactly_once(settings):
    """Three ticks on their own connections drain 600 due emails at once: every email is
    sent exactly once (counted by the fake), none is left, and the ticks shared the budget."""
    with fake_resend(rate=50, burst=50) as resend:
        settings.RESEND_API_KEY = resend.api_key
        settings.RESEND_API_URL = resend.url
        settings.RESEND_RATE_LIMIT = 40
        due_emails(600)
        summaries = run_together([run_tick] * 3, timeout=120)

    assert (len(resend.sent), resend.duplicates(), resend.answered(429)) == (600, {}, 0)
    assert sum(s.delivered for s in summaries) == 600
    assert sum(s.fenced_out for s in summaries) == 0
    assert set(Notification.objects.values_list("state", "next_fire_at")) == {("completed", None)}
