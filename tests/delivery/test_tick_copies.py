"""An email to several addresses is one email per address inside a tick: each settled on its
own, a delivered copy never sent again, a failed one retried alone while another copy of the
email went, recorded per copy in the delivery log; in Resend batches as through the Django
backend, with statements that do not grow with the copies."""

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from delivery.models import Delivery, EmailBatch, Notification
from delivery.scheduler.deliver import Senders
from delivery.scheduler.tick import run_tick
from delivery.transports.base import DeliveryResult
from delivery.transports.resend import BatchAnswer
from outbound.categories import ErrorCategory
from tests.delivery.factories import make_notification, make_notifications, make_tenant

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
ADDRESSES = ("a@example.com", "b@example.com", "c@example.com")
OK = DeliveryResult(ok=True, http_status=200)
TIMEOUT = DeliveryResult(ok=False, error="timed out", category=ErrorCategory.TIMEOUT)
REFUSED = DeliveryResult(
    ok=False, error="refused", permanent=True, category=ErrorCategory.INVALID_REQUEST
)


class Mailer:
    """An email sender that records each message's addresses and answers `fail` for the
    addresses in `failing` (each entry used once, or for ever when `always`)."""

    def __init__(self, failing=(), *, fail=TIMEOUT, always=False):
        self.sent: list[tuple[str, ...]] = []
        self.failing, self.fail, self.always = list(failing), fail, always
        self.lock = threading.Lock()

    def __call__(self, message, *, timeout):
        with self.lock:
            [address] = message.to
            if address in self.failing:
                if not self.always:
                    self.failing.remove(address)
                return self.fail
            self.sent.append(message.to)
            return OK

    def senders(self) -> Senders:
        return Senders(email=self, webhook=self)


def email_row(tenant, addresses=ADDRESSES, **fields):
    return make_notification(
        tenant=tenant, channels=("email",), email_to=list(addresses), next_fire_at=NOW, **fields
    )


def logged(row) -> list[tuple[str, str]]:
    rows = Delivery.objects.filter(notification_id=row.pk).order_by("attempted_at", "recipient")
    return list(rows.values_list("recipient", "outcome"))


def test_three_addresses_get_three_emails_each_to_one_address(db, local_mail, mailoutbox):
    row = email_row(make_tenant(), [*ADDRESSES, "a@example.com"])

    summary = run_tick(now=NOW)

    assert summary.delivered == 1
    assert sorted(message.to for message in mailoutbox) == [[a] for a in ADDRESSES]
    assert logged(row) == [(a, "delivered") for a in ADDRESSES]
    assert set(Delivery.objects.values_list("channel", flat=True)) == {"email"}


def test_one_copy_failing_is_retried_alone_and_the_sent_ones_never_again(db):
    row = email_row(make_tenant())
    mailer = Mailer(failing=["b@example.com"])

    first = run_tick(now=NOW, senders=mailer.senders())

    assert (first.backed_off, first.delivered) == (1, 0)
    row.refresh_from_db()
    assert (row.state, row.error_count, row.last_error) == ("backing_off", 1, "email: timeout")
    assert row.channel_state == {
        "email:a@example.com": "delivered",
        "email:c@example.com": "delivered",
    }
    assert row.next_fire_at == NOW + timedelta(minutes=1)

    second = run_tick(now=NOW + timedelta(minutes=1), senders=mailer.senders())

    assert second.delivered == 1
    assert sorted(mailer.sent) == [(a,) for a in ADDRESSES]  # each once
    row.refresh_from_db()
    assert (row.state, row.channel_state, row.last_error) == ("completed", {}, None)
    assert logged(row) == [
        ("a@example.com", "delivered"),
        ("b@example.com", "timeout"),
        ("c@example.com", "delivered"),
        ("b@example.com", "delivered"),
    ]


def test_a_copy_failing_on_every_attempt_ends_as_a_partial_success(db):
    row = email_row(make_tenant())
    mailer = Mailer(failing=["b@example.com"], always=True)

    for minutes in (0, 1, 6):
        run_tick(now=NOW + timedelta(minutes=minutes), senders=mailer.senders())

    row.refresh_from_db()
    assert (row.state, row.error_count, row.last_error) == ("completed", 0, "partial: email")
    assert sorted(mailer.sent) == [("a@example.com",), ("c@example.com",)]
    outcomes = [outcome for recipient, outcome in logged(row) if recipient == "b@example.com"]
    assert outcomes == ["timeout"] * 3


def test_a_copy_refused_for_good_is_not_retried(db):
    row = email_row(make_tenant())
    mailer = Mailer(failing=["b@example.com"], fail=REFUSED)

    summary = run_tick(now=NOW, senders=mailer.senders())

    assert summary.partial == 1
    row.refresh_from_db()
    assert (row.state, row.last_error) == ("completed", "partial: email")


def test_every_copy_failing_backs_off_the_row_and_sends_them_all_again(db):
    row = email_row(make_tenant())
    mailer = Mailer(failing=list(ADDRESSES))

    assert run_tick(now=NOW, senders=mailer.senders()).backed_off == 1
    assert run_tick(now=NOW + timedelta(minutes=1), senders=mailer.senders()).delivered == 1

    assert sorted(mailer.sent) == [(a,) for a in ADDRESSES]
    row.refresh_from_db()
    assert row.state == "completed"


class BatchRecorder:
    """A Resend batch sender that records each request and answers `answers` in turn, then
    every email sent."""

    def __init__(self, *answers):
        self.calls: list[tuple[str, str]] = []
        self.answers = list(answers)
        self.lock = threading.Lock()

    def __call__(self, *, body, size, key, timeout):
        with self.lock:
            self.calls.append((key, body))
            answer = self.answers.pop(0) if self.answers else None
        return answer(size) if answer else BatchAnswer(results=[OK] * size)

    def senders(self) -> Senders:
        def alone(message, *, timeout):
            raise AssertionError("an email went out alone")

        return Senders(email=alone, webhook=alone, email_batch=self)


@pytest.fixture
def fast_budget(settings):
    settings.RESEND_RATE_LIMIT = 1000


def test_a_rows_copies_go_in_one_batch_each_a_member_of_its_own(db, fast_budget):
    rows = [email_row(make_tenant()) for _ in range(40)]
    sender = BatchRecorder()

    summary = run_tick(now=NOW, senders=sender.senders())

    assert summary.delivered == 40
    # 120 emails: two batches of whole rows (33 rows, 99 emails; then 7 rows, 21).
    assert sorted(len(json.loads(body)) for _, body in sender.calls) == [21, 99]
    for _, body in sender.calls:
        assert all(len(email["to"]) == 1 for email in json.loads(body))
    members = [m for batch in EmailBatch.objects.all() for m in batch.members]
    assert sorted(members) == sorted(f"{r.pk}/1/{a}" for r in rows for a in ADDRESSES)


def test_a_batch_without_an_answer_is_resent_identical_and_no_copy_goes_twice(db, fast_budget):
    row = email_row(make_tenant())
    sender = BatchRecorder(lambda size: BatchAnswer(results=[TIMEOUT] * size))

    first = run_tick(now=NOW, senders=sender.senders())
    second = run_tick(now=NOW + timedelta(minutes=2), senders=sender.senders())
    third = run_tick(now=NOW + timedelta(minutes=10), senders=sender.senders())

    assert (first.backed_off, second.delivered, third.claimed) == (1, 1, 0)
    [batch] = EmailBatch.objects.all()
    [(key1, body1), (key2, body2)] = sender.calls
    # The same bytes under the same key: the provider answers the retry from its first send.
    assert (key1, body1) == (key2, body2) == (batch.idempotency_key, batch.body)
    row.refresh_from_db()
    assert (row.state, row.email_batch_id) == ("completed", None)


def test_a_per_email_refusal_in_a_batch_fails_that_copy_alone(db, fast_budget):
    row = email_row(make_tenant())
    sender = BatchRecorder(lambda size: BatchAnswer(results=[OK, REFUSED, OK][:size]))

    summary = run_tick(now=NOW, senders=sender.senders())

    assert summary.partial == 1
    assert dict(logged(row))["b@example.com"] == "failed"
    assert len(sender.calls) == 1


LOG_INSERT = 'INSERT INTO "notifications_delivery"'


def tick_statements(rows: int, addresses: tuple[str, ...], senders: Senders) -> tuple[int, int]:
    """The statements of a tick delivering `rows` emails to `addresses` each: those other
    than the delivery log's inserts, and those (one log row per copy, in the multi-row
    batches the backend allows)."""
    tenant = make_tenant()
    make_notifications(
        rows, tenant=tenant, channels=("email",), email_to=list(addresses), next_fire_at=NOW
    )
    with CaptureQueriesContext(connection) as queries:
        summary = run_tick(now=NOW, concurrency=rows + 1, senders=senders)
    assert summary.delivered == rows
    logs = sum(query["sql"].startswith(LOG_INSERT) for query in queries.captured_queries)
    return len(queries) - logs, logs


@pytest.mark.parametrize("lane", ["backend", "resend"])
def test_a_ticks_statements_grow_with_neither_rows_nor_copies(db, fast_budget, lane):
    def senders():
        return Mailer().senders() if lane == "backend" else BatchRecorder().senders()

    tick_statements(1, ADDRESSES[:1], senders())  # the process's first look at plans
    Notification.objects.all().delete()

    counts = {
        (rows, len(addresses)): tick_statements(rows, addresses, senders())
        for rows in (3, 30)
        for addresses in (ADDRESSES[:1], ADDRESSES)
    }

    assert len({others for others, _ in counts.values()}) == 1, counts
    # 90 log rows take SQLite two multi-row INSERTs (its bound on parameters), PostgreSQL one.
    assert {logs for _, logs in counts.values()} <= {1, 2}, counts
