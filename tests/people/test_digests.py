"""Digests: joins are one upsert on one open row per (tenant, recipient, key); the tick
sends one email listing the first 10 events and how many more, then the next join opens a
new digest. Twenty joins in parallel on PostgreSQL, each on its own connection, make one
row with twenty events."""

import uuid
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest
from django.core import mail
from django.db import connection

from delivery.models import Delivery, Notification
from delivery.scheduler.tick import run_tick
from people.digests import MAX_SHOWN, digest_body, digest_join, digest_subject
from people.models import Digest
from people.recipients import recipient_put
from tests.conftest import requires_postgres
from tests.delivery.factories import make_tenant
from tests.support.concurrency import run_together

NOW = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)


def join(tenant, n, *, now=NOW, key="comments", recipient="ada", digest_subject=""):
    return digest_join(
        tenant=tenant,
        recipient_key=recipient,
        key=key,
        window_seconds=60,
        subject=f"Comment {n}",
        body=f"Body {n}",
        category="activity",
        now=now,
        digest_subject=digest_subject,
    )


def test_joins_share_one_row_and_one_email_notification(db):
    tenant = make_tenant()
    recipient_put(tenant=tenant, key="ada", email="ada@example.com", now=NOW)

    rows = {join(tenant, n).pk for n in range(3)}

    [digest] = Digest.objects.all()
    assert (digest.count, len(digest.items), digest.is_open) == (3, 3, True)
    assert rows == {digest.notification_id}
    notification = Notification.objects.get()
    assert notification.next_fire_at == NOW + timedelta(seconds=60)
    assert (notification.recipients, notification.digest_key) == (["ada"], "comments")
    # Another key, or another recipient, is another digest.
    join(tenant, 9, key="likes")
    join(tenant, 9, recipient="bob")
    assert Digest.objects.count() == 3


def test_a_join_is_one_statement_besides_its_transaction(db, django_assert_num_queries):
    tenant = make_tenant()
    join(tenant, 0)
    # The upsert, then reading the digest's notification (savepoints aside).
    with django_assert_num_queries(4, exact=False) as ctx:
        join(tenant, 1)
    statements = [q["sql"] for q in ctx.captured_queries if "SAVEPOINT" not in q["sql"]]
    assert len(statements) == 2
    assert "ON CONFLICT" in statements[0]


def test_the_tick_sends_one_email_with_the_first_ten_and_the_rest_counted(db, local_mail):
    tenant = make_tenant()
    recipient_put(tenant=tenant, key="ada", email="ada@example.com", now=NOW)
    for n in range(25):
        join(tenant, n)

    assert run_tick(now=NOW + timedelta(seconds=59)).claimed == 0
    summary = run_tick(now=NOW + timedelta(seconds=60))

    assert summary.delivered == 1
    [sent] = mail.outbox
    assert sent.to == ["ada@example.com"]
    assert sent.subject == (
        "25 updates: Comment 0, Comment 1, Comment 2, Comment 3, Comment 4, Comment 5, "
        "Comment 6, Comment 7, Comment 8, Comment 9, …"
    )
    assert sent.body.splitlines()[:2] == ["- Comment 0", "  Body 0"]
    assert "- Comment 9" in sent.body and "Comment 10" not in sent.body
    listing, _, footer = sent.body.partition("\n\n--\n")
    assert listing.endswith("and 15 more")
    assert footer.startswith("To stop receiving these emails, open ")
    assert "List-Unsubscribe" in sent.message()
    assert not Digest.objects.get().is_open
    # The next join opens a new digest, with its own email.
    later = join(tenant, 99, now=NOW + timedelta(seconds=61))
    assert Digest.objects.filter(is_open=True).get().notification_id == later.pk
    assert Notification.objects.count() == 2
    assert Delivery.objects.filter(outcome="delivered").count() == 1


def test_the_body_lists_at_most_ten():
    items = [{"subject": f"s{n}", "body": ""} for n in range(12)]
    assert digest_body(items, count=40).splitlines() == [
        *(f"- s{n}" for n in range(10)),
        "and 30 more",
    ]
    assert digest_body(items[:2], count=2) == "- s0\n- s1"


def test_a_digest_of_three_says_so_in_its_subject(db, local_mail):
    tenant = make_tenant()
    recipient_put(tenant=tenant, key="ada", email="ada@example.com", now=NOW)
    for n in range(1, 4):
        join(tenant, n)

    run_tick(now=NOW + timedelta(seconds=60))

    [sent] = mail.outbox
    assert sent.subject == "3 updates: Comment 1, Comment 2, Comment 3"


def test_a_key_s_subject_is_the_latest_a_join_named_with_the_count(db, local_mail):
    tenant = make_tenant()
    recipient_put(tenant=tenant, key="ada", email="ada@example.com", now=NOW)
    join(tenant, 1, digest_subject="Comments on your post")
    join(tenant, 2, digest_subject="New comments")
    join(tenant, 3)  # names none: the subject stays
    join(tenant, 4, key="likes")

    run_tick(now=NOW + timedelta(seconds=60))

    assert Digest.objects.get(key="comments").subject == "New comments"
    assert sorted(sent.subject for sent in mail.outbox) == [
        "1 update: Comment 4",
        "New comments (3 updates)",
    ]


def test_the_default_subject_is_bounded():
    long = [{"subject": "x" * 120, "body": ""} for _ in range(3)]

    subject = digest_subject(long, count=3, subject="")

    assert subject.startswith("3 updates: " + "x" * 120 + ", x")
    assert subject.endswith("…")
    assert len(subject) <= 200
    assert digest_subject(long[:1], count=1, subject="") == "1 update: " + "x" * 120


def test_the_api_joins_a_digest(alice):
    recipient_put(tenant=alice.tenant, key="ada", email="ada@example.com", now=NOW)
    body = {
        "channels": ["email"],
        "recipients": ["ada"],
        "subject": "New comment",
        "body": "Hi",
        "digest": {"key": "comments", "window_seconds": 300},
    }
    answers = [
        alice.client().post(
            "/v1/notifications", body, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())
        )
        for _ in range(2)
    ]

    assert [a.status_code for a in answers] == [201, 201]
    assert answers[0].json()["id"] == answers[1].json()["id"]
    assert Digest.objects.get().count == 2


def test_the_api_sets_a_digest_key_s_subject(alice):
    recipient_put(tenant=alice.tenant, key="ada", email="ada@example.com", now=NOW)
    body = {
        "channels": ["email"],
        "recipients": ["ada"],
        "subject": "New comment",
        "body": "Hi",
        "digest": {"key": "comments", "window_seconds": 300, "subject": "Your comments"},
    }

    response = alice.client().post(
        "/v1/notifications", body, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())
    )

    assert response.status_code == 201, response.json()
    assert Digest.objects.get().subject == "Your comments"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"channels": ["email", "webhook"]}, "webhook_endpoint"),
        ({"recipients": []}, "email_to"),
        ({"rrule": "FREQ=DAILY"}, "digest"),
        ({"digest": {"key": "comments", "window_seconds": 0}}, "digest"),
        ({"digest": {"key": "no spaces", "window_seconds": 60}}, "digest"),
        ({"digest": {"key": "k", "window_seconds": 60, "extra": 1}}, "digest"),
        ({"digest": {"key": "k", "window_seconds": 60, "subject": "x" * 101}}, "digest"),
        ({"digest": {"key": "k", "window_seconds": 60, "subject": "Two\nlines"}}, "digest"),
        ({"digest": {"key": "k", "window_seconds": 60, "subject": 3}}, "digest"),
    ],
)
def test_a_bad_digest_is_400_and_writes_nothing(alice, change, field):
    recipient_put(tenant=alice.tenant, key="ada", email="ada@example.com", now=NOW)
    body = {
        "channels": ["email"],
        "recipients": ["ada"],
        "subject": "S",
        "body": "B",
        "digest": {"key": "comments", "window_seconds": 60},
        **change,
    }

    response = alice.client().post(
        "/v1/notifications", body, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())
    )

    assert response.status_code == 400, response.json()
    assert field in response.json()["errors"]
    assert not Digest.objects.exists() and not Notification.objects.exists()


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_twenty_parallel_joins_make_one_row_with_twenty_events():
    tenant = make_tenant()

    run_together([partial(join, tenant, n) for n in range(20)])  # raises what a join raised

    [digest] = Digest.objects.all()
    assert (digest.count, len(digest.items)) == (20, MAX_SHOWN)
    kept = {item["subject"] for item in digest.items}
    assert len(kept) == MAX_SHOWN and kept <= {f"Comment {n}" for n in range(20)}
    assert Notification.objects.get().pk == digest.notification_id
    assert connection.vendor == "postgresql"
