"""Email in Resend batches inside a tick: up to 100 emails a request, paced by the shared send
budget, the composition recorded before the send, a retry resending the identical batch under
the same key, per-email errors as per-channel outcomes."""

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest

from dbqueue.pacing import next_slot, reserve_slots
from delivery.models import Delivery, DeliveryOutcome, EmailBatch, Notification
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
from delivery.transports.base import DeliveryResult
from delivery.transports.resend import BatchAnswer
from tests.delivery.factories import make_endpoint, make_notifications, make_tenant

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
OK = DeliveryResult(ok=True, http_status=200)


class BatchRecorder:
    """A batch sender that records every request and answers with `answer(size)`."""

    def __init__(self, answer=None):
        self.calls: list[tuple[str, str]] = []
        self.answer = answer or (lambda size: BatchAnswer(results=[OK] * size))
        self.lock = threading.Lock()

    def __call__(self, *, body, size, key, timeout):
        with self.lock:
            self.calls.append((key, body))
        return self.answer(size)

    def recipients(self) -> list[str]:
        return [e["to"][0] for _, body in self.calls for e in json.loads(body)]


def no_single_email(message, *, timeout):
    raise AssertionError("an email went out alone")


def senders(batches, webhook=None) -> Senders:
    return Senders(email=no_single_email, webhook=webhook or no_single_email, email_batch=batches)


def email_rows(count, tenant, *, at=NOW, prefix="user"):
    rows = make_notifications(count, tenant=tenant, channels=["email"], next_fire_at=at)
    for i, row in enumerate(rows):
        row.email_to = [f"{prefix}{i}@example.com"]
    Notification.objects.bulk_update(rows, ["email_to"])
    return rows


@pytest.fixture(autouse=True)
def fast_budget(settings):
    settings.RESEND_RATE_LIMIT = 1000  # pacing has its own tests below


def test_250_due_emails_go_out_in_three_batches_each_sent_once(db):
    rows = email_rows(250, make_tenant())
    sender = BatchRecorder()

    summary = run_tick(now=NOW, senders=senders(sender))

    assert (summary.claimed, summary.delivered) == (250, 250)
    assert sorted(len(json.loads(body)) for _, body in sender.calls) == [50, 100, 100]
    assert sorted(sender.recipients()) == sorted(r.email_to[0] for r in rows)
    assert len({key for key, _ in sender.calls}) == 3
    assert set(Notification.objects.values_list("state", "next_fire_at")) == {("completed", None)}
    assert (
        Delivery.objects.filter(channel="email", outcome=DeliveryOutcome.DELIVERED).count() == 250
    )
    recorded = {b.idempotency_key: b for b in EmailBatch.objects.all()}
    for key, body in sender.calls:
        assert recorded[key].body == body  # what was recorded is what was sent


def test_a_webhook_and_an_email_row_sends_both_and_is_written_back_once(db):
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/in")
    [row] = make_notifications(
        1,
        tenant=tenant,
        endpoint=endpoint,
        channels=["email", "webhook"],
        email_to=["ada@example.com"],
        next_fire_at=NOW,
    )
    hooks = []
    sender = BatchRecorder()

    def webhook(message, *, timeout):
        hooks.append(message.msg_id)
        return OK

    summary = run_tick(now=NOW, senders=senders(sender, webhook))

    assert (summary.claimed, summary.delivered) == (1, 1)
    assert (sender.recipients(), len(hooks)) == (["ada@example.com"], 1)
    logs = Delivery.objects.filter(notification_id=row.pk)
    assert sorted(logs.values_list("channel", "outcome")) == [
        ("email", "delivered"),
        ("webhook", "delivered"),
    ]
    assert set(Notification.objects.values_list("state", "next_fire_at")) == {("completed", None)}


def test_a_per_email_error_fails_that_email_alone(db):
    rows = email_rows(3, make_tenant())
    refused = DeliveryResult(ok=False, error="refused", permanent=True, category="invalid_request")
    sender = BatchRecorder(lambda size: BatchAnswer(results=[OK, refused, OK][:size]))

    summary = run_tick(now=NOW, senders=senders(sender))

    assert (summary.delivered, summary.dead_lettered) == (2, 1)
    [parked] = Notification.objects.exclude(state="completed")
    [(_key, body)] = sender.calls
    refused_to = json.loads(body)[1]["to"]
    assert parked.email_to == refused_to
    assert (parked.dead_letter_reason, parked.email_batch_id) == ("permanent", None)
    assert {r.pk for r in rows} >= {parked.pk}


def test_a_batch_without_an_answer_is_resent_identical_under_its_key(db):
    email_rows(5, make_tenant())
    lost = DeliveryResult(ok=False, error="timed out", category="timeout")
    answers = iter([lambda size: BatchAnswer(results=[lost] * size)])
    sender = BatchRecorder(lambda size: next(answers, lambda n: BatchAnswer([OK] * n))(size))

    first = run_tick(now=NOW, senders=senders(sender))
    assert (first.backed_off, first.delivered) == (5, 0)
    [batch] = EmailBatch.objects.all()
    assert set(Notification.objects.values_list("email_batch_id", flat=True)) == {batch.pk}

    second = run_tick(now=NOW + timedelta(minutes=2), senders=senders(sender))

    assert second.delivered == 5
    [(key1, body1), (key2, body2)] = sender.calls
    assert (key1, body1) == (key2, body2) == (batch.idempotency_key, batch.body)
    assert set(Notification.objects.values_list("state", "next_fire_at")) == {("completed", None)}


def test_a_429_defers_the_batch_without_an_attempt_and_holds_the_shared_budget(db):
    email_rows(4, make_tenant())
    pushed = DeliveryResult(
        ok=False, error="429", category="http_4xx", retry_after=30, backpressure=True
    )
    sender = BatchRecorder(lambda size: BatchAnswer(results=[pushed] * size, hold_seconds=30))

    summary = run_tick(now=NOW, senders=senders(sender))

    assert (summary.deferred, summary.backed_off) == (4, 0)
    rows = Notification.objects.all()
    assert {(r.error_count, r.next_fire_at) for r in rows} == {(0, NOW + timedelta(seconds=30))}
    assert next_slot("resend") >= NOW + timedelta(seconds=30)
    assert Delivery.objects.filter(outcome=DeliveryOutcome.DEFERRED).count() == 4


def test_a_retried_dead_letter_goes_in_a_new_batch_with_a_new_key(db, tenant):
    from notifications.services import notification_retry

    [row] = email_rows(1, tenant)
    refused = DeliveryResult(ok=False, error="401", permanent=True, category="http_4xx")
    answers = iter([BatchAnswer(results=[refused])])
    sender = BatchRecorder(lambda size: next(answers, BatchAnswer(results=[OK] * size)))
    run_tick(now=NOW, senders=senders(sender))
    notification_retry(tenant=tenant, notification_id=row.pk, now=NOW + timedelta(minutes=1))

    run_tick(now=NOW + timedelta(minutes=1), senders=senders(sender))

    [(key1, _), (key2, _)] = sender.calls
    assert key1 != key2
    assert set(Notification.objects.values_list("state", "next_fire_at")) == {("completed", None)}


def test_without_a_slot_within_the_horizon_email_rows_stay_due_and_unclaimed(db):
    rows = email_rows(3, make_tenant())
    reserve_slots("resend", rate=1 / 300, count=1, now=NOW)  # another process took 5 min
    sender = BatchRecorder()

    summary = run_tick(now=NOW, senders=senders(sender), time_budget=0.5)

    assert (summary.claimed, sender.calls) == (0, [])
    assert summary.due_left == 3
    for row in rows:
        fresh = Notification.objects.get(pk=row.pk)
        assert (fresh.claim_token, fresh.next_fire_at) == (row.claim_token, NOW)


def test_batches_are_paced_at_the_rate_through_the_shared_budget(db, settings):
    settings.RESEND_RATE_LIMIT = 4
    email_rows(300, make_tenant())
    sender = BatchRecorder()

    summary = run_tick(now=NOW, senders=senders(sender))

    assert (summary.delivered, len(sender.calls)) == (300, 3)
    # Three slots a quarter of a second apart were taken: the next free one is the fourth.
    assert next_slot("resend") == NOW + timedelta(seconds=0.75)


def test_a_row_reclaimed_meanwhile_is_left_out_of_the_new_batch(db):
    from delivery.scheduler.mail import compose

    tenant = make_tenant()
    kept, reclaimed = email_rows(2, tenant)
    lease = NOW + timedelta(seconds=45)
    Notification.objects.update(claimed_until=lease)
    Notification.objects.filter(pk=reclaimed.pk).update(claim_token=reclaimed.claim_token + 1)

    (batch,) = compose([kept, reclaimed], now=NOW)

    assert [member.row.pk for member in batch.members] == [kept.pk]
    assert batch.record.members == [f"{kept.pk}/{kept.occurrence}/user0@example.com"]
    assert [e["to"] for e in json.loads(batch.record.body)] == [["user0@example.com"]]
    named = dict(Notification.objects.values_list("pk", "email_batch_id"))
    assert named == {kept.pk: batch.record.pk, reclaimed.pk: None}
    # Naming the batch is a write during the work: the kept row's lease stays.
    assert Notification.objects.get(pk=kept.pk).claimed_until == lease
