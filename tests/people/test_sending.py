"""The tick sending to people: recipients' current addresses, opt-outs skipped and logged,
critical categories, quiet hours deferred without an attempt, and the RFC 8058 headers
received by Django's e-mail backend and by the fake Resend — and the unsubscribe they
lead to, which holds from the next tick on."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core import mail
from rest_framework.test import APIClient

from delivery.models import Delivery, Notification
from delivery.scheduler.tick import run_tick
from notifications.services import notification_create
from people import preferences
from people.models import Recipient
from people.recipients import preferences_put, recipient_put
from tenancy.models import OperationKey
from tests.delivery.factories import make_tenant
from tests.support.fake_resend import fake_resend

# Saturday 2026-03-28 10:00 UTC; the Monday after, 09:00 in Berlin (CEST since Sunday).
SATURDAY = datetime(2026, 3, 28, 10, 0, tzinfo=UTC)
MONDAY_OPENING = datetime(2026, 3, 30, 7, 0, tzinfo=UTC)
WEEKDAYS = {"days": ["MO", "TU", "WE", "TH", "FR"], "from": "09:00", "until": "17:00"}


@pytest.fixture
def backend(settings, local_mail):
    settings.UNSUBSCRIBE_URL = "https://api.example.com/v1/unsubscribe/{token}"
    settings.CRITICAL_CATEGORIES = ["security"]


@pytest.fixture
def tenant(db):
    return make_tenant()


def person(tenant, key="ada", *, email="ada@example.com", **fields):
    return recipient_put(tenant=tenant, key=key, email=email, now=SATURDAY, **fields)[0]


def notify(tenant, *recipients, category="", channels=("email",), now=SATURDAY):
    return notification_create(
        tenant=tenant,
        channels=list(channels),
        subject="Reminder",
        body="It is time.",
        recipients=list(recipients),
        category=category,
        now=now,
    )


def token_of(header: str) -> str:
    assert header.startswith("<https://api.example.com/v1/unsubscribe/") and header.endswith(">")
    return header[1:-1].rsplit("/", 1)[1]


def unsubscribe(token: str):
    return APIClient().post(f"/v1/unsubscribe/{token}")


def test_the_email_goes_to_the_recipients_address_at_send_time_with_both_headers(backend, tenant):
    person(tenant)
    notify(tenant, "ada", category="reminders")
    person(tenant, email="ada@new.example.com")  # changed after the notification was made

    summary = run_tick(now=SATURDAY)

    assert summary.delivered == 1
    [sent] = mail.outbox
    assert sent.to == ["ada@new.example.com"]
    message = sent.message()
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    token = token_of(message["List-Unsubscribe"])
    # Never stored: neither the row nor anything else in the database holds it.
    assert token not in str(list(Notification.objects.values()))
    assert token not in str(list(Delivery.objects.values()))


def test_an_opted_out_email_is_suppressed_logged_and_never_sent(backend, tenant):
    person(tenant)
    preferences_put(
        tenant=tenant,
        key="ada",
        preferences={"categories": {"marketing": {"email": False}}},
        now=SATURDAY,
    )
    row = notify(tenant, "ada", category="marketing")

    summary = run_tick(now=SATURDAY)

    assert mail.outbox == []
    [log] = Delivery.objects.filter(notification_id=row.pk)
    assert (log.channel, log.outcome, log.error_category) == ("email", "suppressed", "preference")
    assert log.error == "not sent: preference"
    row.refresh_from_db()
    assert (row.state, row.error_count) == ("completed", 0)
    # Counted as what it is, not as a delivery.
    assert (summary.suppressed, summary.delivered) == (1, 0)
    assert "suppressed=1" in summary.line()


def test_all_email_off_skips_every_category_but_a_critical_one(backend, tenant):
    person(tenant)
    preferences_put(
        tenant=tenant, key="ada", preferences={"channels": {"email": False}}, now=SATURDAY
    )
    skipped = notify(tenant, "ada", category="reminders")
    critical = notify(tenant, "ada", category="security")

    run_tick(now=SATURDAY)

    [sent] = mail.outbox
    assert sent.to == ["ada@example.com"]
    # A critical email carries no unsubscribe link.
    assert "List-Unsubscribe" not in sent.message()
    outcomes = dict(Delivery.objects.values_list("notification_id", "outcome"))
    assert outcomes == {skipped.pk: "suppressed", critical.pk: "delivered"}


def test_a_webhook_the_recipient_opted_out_of_is_suppressed(backend, tenant, settings):
    from tests.delivery.factories import make_endpoint

    person(tenant)
    preferences_put(
        tenant=tenant, key="ada", preferences={"channels": {"webhook": False}}, now=SATURDAY
    )
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/in")
    row = notification_create(
        tenant=tenant,
        channels=["email", "webhook"],
        subject="S",
        body="B",
        recipients=["ada"],
        webhook_endpoint_id=endpoint.pk,
        now=SATURDAY,
    )

    summary = run_tick(now=SATURDAY)

    logs = dict(Delivery.objects.filter(notification_id=row.pk).values_list("channel", "outcome"))
    assert logs == {"email": "delivered", "webhook": "suppressed"}
    # Something of it was sent: a delivery.
    assert (summary.delivered, summary.suppressed) == (1, 0)
    assert len(mail.outbox) == 1


def test_a_recipient_deleted_before_the_send_suppresses_the_email(backend, tenant):
    person(tenant)
    row = notify(tenant, "ada")
    Recipient.objects.all().delete()

    run_tick(now=SATURDAY)

    assert mail.outbox == []
    [log] = Delivery.objects.filter(notification_id=row.pk)
    assert (log.outcome, log.error_category) == ("suppressed", "no_recipient")


def test_unsubscribe_mutes_the_category_from_the_next_tick_and_is_idempotent(backend, tenant):
    person(tenant)
    notify(tenant, "ada", category="reminders")
    run_tick(now=SATURDAY)
    token = token_of(mail.outbox[0].message()["List-Unsubscribe"])

    assert unsubscribe(token).status_code == 204
    assert unsubscribe(token).status_code == 204

    assert Recipient.objects.get().preferences == {"categories": {"reminders": {"email": False}}}
    muted = notify(tenant, "ada", category="reminders")
    other = notify(tenant, "ada", category="billing")
    run_tick(now=SATURDAY)
    assert len(mail.outbox) == 2
    outcomes = dict(
        Delivery.objects.filter(notification_id__in=[muted.pk, other.pk]).values_list(
            "notification_id", "outcome"
        )
    )
    assert outcomes == {muted.pk: "suppressed", other.pk: "delivered"}


def test_unsubscribe_without_a_category_mutes_all_email(backend, tenant):
    person(tenant)
    notify(tenant, "ada")
    run_tick(now=SATURDAY)

    assert unsubscribe(token_of(mail.outbox[0].message()["List-Unsubscribe"])).status_code == 204

    assert Recipient.objects.get().preferences == {"channels": {"email": False}}


@pytest.mark.parametrize(
    "mangle",
    [
        lambda t: t[:-1] + ("A" if t[-1] != "A" else "B"),  # the signature altered
        lambda t: "eyJ4Ijoi" + t[8:],  # the payload altered
        lambda t: "garbage",
        lambda t: "a.b",
        lambda t: t.split(".")[0],
        lambda t: "%00" + t,
    ],
)
def test_a_forged_token_is_400_and_changes_nothing(backend, tenant, mangle):
    person(tenant)
    notify(tenant, "ada")
    run_tick(now=SATURDAY)
    token = token_of(mail.outbox[0].message()["List-Unsubscribe"])

    response = unsubscribe(mangle(token))

    assert response.status_code == 400
    assert response.json()["type"].endswith("/invalid-token")
    assert Recipient.objects.get().preferences == {}


def test_an_email_due_in_quiet_hours_is_deferred_to_the_windows_opening_not_attempted(
    backend, tenant
):
    person(tenant, timezone="Europe/Berlin", send_window=WEEKDAYS)
    row = notify(tenant, "ada")

    summary = run_tick(now=SATURDAY)

    assert (summary.deferred, summary.delivered, mail.outbox) == (1, 0, [])
    row.refresh_from_db()
    assert (row.next_fire_at, row.error_count, row.state) == (MONDAY_OPENING, 0, "scheduled")
    [log] = Delivery.objects.filter(notification_id=row.pk)
    assert (log.outcome, log.error_category) == ("deferred", "quiet_hours")

    assert run_tick(now=MONDAY_OPENING).delivered == 1
    assert [m.to for m in mail.outbox] == [["ada@example.com"]]


def test_each_recipient_gets_an_email_of_their_own_with_their_own_unsubscribe_link(backend, tenant):
    person(tenant)
    person(tenant, "bob", email="bob@example.com")
    person(tenant, "cy", email="cy@example.com")
    person(tenant, "eve", email="eve@example.com")
    preferences_put(
        tenant=tenant, key="eve", preferences={"channels": {"email": False}}, now=SATURDAY
    )
    row = notify(tenant, "ada", "bob", "cy", "eve", category="reminders")

    summary = run_tick(now=SATURDAY)

    assert summary.delivered == 1
    assert sorted(sent.to for sent in mail.outbox) == [
        ["ada@example.com"],
        ["bob@example.com"],
        ["cy@example.com"],
    ]
    tokens = {}
    for sent in mail.outbox:
        message = sent.message()
        assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        tokens[sent.to[0]] = token_of(message["List-Unsubscribe"])
        assert tokens[sent.to[0]] in sent.body  # the footer's link is theirs too
    assert len(set(tokens.values())) == 3
    logs = Delivery.objects.filter(notification_id=row.pk).values_list("recipient", "outcome")
    assert sorted(logs) == [
        ("ada", "delivered"),
        ("bob", "delivered"),
        ("cy", "delivered"),
        ("eve", "suppressed"),
    ]
    # Each link unsubscribes its own recipient, and nobody else.
    assert unsubscribe(tokens["bob@example.com"]).status_code == 204
    muted = {r.key for r in Recipient.objects.all() if r.preferences.get("categories")}
    assert muted == {"bob"}


def test_a_critical_email_to_several_goes_to_each_without_an_unsubscribe_header(backend, tenant):
    person(tenant)
    person(tenant, "bob", email="bob@example.com")
    person(tenant, "cy", email="cy@example.com")
    notify(tenant, "ada", "bob", "cy", category="security")

    run_tick(now=SATURDAY)

    assert sorted(len(sent.to) for sent in mail.outbox) == [1, 1, 1]
    for sent in mail.outbox:
        assert "List-Unsubscribe" not in sent.message()
        assert "List-Unsubscribe-Post" not in sent.message()


def test_two_keys_of_one_address_make_one_email(backend, tenant):
    person(tenant)
    person(tenant, "ada-work", email="ada@example.com")
    notify(tenant, "ada", "ada-work")

    run_tick(now=SATURDAY)

    assert [sent.to for sent in mail.outbox] == [["ada@example.com"]]


# Weekday mornings 09:00 to 12:00 in Tokyo (00:00 to 03:00 UTC) and in Berlin (07:00 to
# 10:00 UTC in summer time): windows that never overlap.
MORNINGS = {"days": ["MO", "TU", "WE", "TH", "FR"], "from": "09:00", "until": "12:00"}
TOKYO_OPENS = datetime(2026, 3, 30, 0, 0, tzinfo=UTC)
BERLIN_OPENS = datetime(2026, 3, 30, 7, 0, tzinfo=UTC)


def test_recipients_whose_windows_never_overlap_each_get_it_in_their_own_window(backend, tenant):
    person(tenant, timezone="Europe/Berlin", send_window=MORNINGS)
    person(tenant, "kenji", email="kenji@example.com", timezone="Asia/Tokyo", send_window=MORNINGS)
    row = notify(tenant, "ada", "kenji")

    first = run_tick(now=SATURDAY)

    assert (first.deferred, mail.outbox) == (1, [])
    row.refresh_from_db()
    assert (row.next_fire_at, row.error_count) == (TOKYO_OPENS, 0)

    second = run_tick(now=TOKYO_OPENS)

    assert second.deferred == 1
    assert [sent.to for sent in mail.outbox] == [["kenji@example.com"]]
    row.refresh_from_db()
    assert (row.state, row.next_fire_at, row.error_count) == ("scheduled", BERLIN_OPENS, 0)
    assert row.channel_state == {"email:kenji": "delivered"}

    third = run_tick(now=BERLIN_OPENS)

    assert third.delivered == 1
    assert [sent.to for sent in mail.outbox] == [["kenji@example.com"], ["ada@example.com"]]
    row.refresh_from_db()
    assert (row.state, row.channel_state, row.last_error) == ("completed", {}, None)
    logs = Delivery.objects.filter(notification_id=row.pk, outcome="delivered")
    sent_at = dict(logs.values_list("recipient", "attempted_at"))
    assert sent_at == {"kenji": TOKYO_OPENS, "ada": BERLIN_OPENS}
    deferred = Delivery.objects.filter(notification_id=row.pk, outcome="deferred")
    assert sorted(deferred.values_list("recipient", "error_category")) == [
        ("ada", "quiet_hours"),
        ("ada", "quiet_hours"),
        ("kenji", "quiet_hours"),
    ]


def test_resend_batches_carry_the_headers_per_email(db, settings, tenant):
    settings.UNSUBSCRIBE_URL = "https://api.example.com/v1/unsubscribe/{token}"
    settings.CRITICAL_CATEGORIES = ["security"]
    with fake_resend(rate=10) as resend:
        settings.RESEND_API_KEY, settings.RESEND_API_URL = resend.api_key, resend.url
        person(tenant)
        person(tenant, "bob", email="bob@example.com")
        notify(tenant, "ada", category="reminders")
        notify(tenant, "bob", category="security")

        summary = run_tick()

    assert summary.delivered == 2
    by_address = {email.to[0]: email for email in resend.sent}
    ada, bob = by_address["ada@example.com"], by_address["bob@example.com"]
    assert ada.headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    token = token_of(ada.headers["List-Unsubscribe"])
    assert "List-Unsubscribe" not in bob.headers
    # The recorded batch holds the reference, not the token.
    from delivery.models import EmailBatch

    assert token not in EmailBatch.objects.get().body
    assert unsubscribe(token).status_code == 204


def test_resend_batches_carry_one_email_per_recipient_each_with_its_own_headers(
    db, settings, tenant
):
    from delivery.models import EmailBatch

    settings.UNSUBSCRIBE_URL = "https://api.example.com/v1/unsubscribe/{token}"
    with fake_resend(rate=10) as resend:
        settings.RESEND_API_KEY, settings.RESEND_API_URL = resend.api_key, resend.url
        for key in ("ada", "bob", "cy"):
            person(tenant, key, email=f"{key}@example.com")
        row = notify(tenant, "ada", "bob", "cy", category="reminders")

        summary = run_tick()

    assert summary.delivered == 1
    assert sorted(email.to for email in resend.sent) == [
        ["ada@example.com"],
        ["bob@example.com"],
        ["cy@example.com"],
    ]
    tokens = {token_of(email.headers["List-Unsubscribe"]) for email in resend.sent}
    assert len(tokens) == 3
    [batch] = EmailBatch.objects.all()
    assert sorted(batch.members) == [f"{row.pk}/1/{key}" for key in ("ada", "bob", "cy")]


def test_a_resent_batch_carries_only_the_copies_it_holds_and_none_goes_twice(
    backend, tenant, settings
):
    from delivery.models import EmailBatch
    from delivery.scheduler.deliver import Senders
    from delivery.transports.base import DeliveryResult
    from delivery.transports.resend import BatchAnswer

    settings.RESEND_RATE_LIMIT = 1000
    lost = DeliveryResult(ok=False, error="timed out", category="timeout")
    calls = []

    def batches(*, body, size, key, timeout):
        calls.append((key, [email["to"][0] for email in json.loads(body)]))
        ok = DeliveryResult(ok=True, http_status=200)
        return BatchAnswer(results=[lost if len(calls) == 1 else ok] * size)

    def alone(message, *, timeout):
        raise AssertionError("an email went out alone")

    senders = Senders(email=alone, webhook=alone, email_batch=batches)
    person(tenant)  # no window: always open
    person(tenant, "kenji", email="kenji@example.com", timezone="Asia/Tokyo", send_window=MORNINGS)
    row = notify(tenant, "ada", "kenji", now=TOKYO_OPENS - timedelta(seconds=30))

    # Ada's copy goes in a batch that gets no answer; Kenji's waits for his window.
    run_tick(now=TOKYO_OPENS - timedelta(seconds=30), senders=senders)
    # The retry, once his window is open: the recorded batch again, identical, for Ada's
    # copy alone; Kenji's, which it does not hold, waits for the next claim.
    run_tick(now=TOKYO_OPENS + timedelta(seconds=30), senders=senders)
    run_tick(now=TOKYO_OPENS + timedelta(seconds=30), senders=senders)

    assert [to for _, to in calls] == [
        ["ada@example.com"],
        ["ada@example.com"],
        ["kenji@example.com"],
    ]
    first, again, kenji = (key for key, _ in calls)
    assert first == again != kenji
    assert EmailBatch.objects.count() == 2
    row.refresh_from_db()
    assert (row.state, row.last_error) == ("completed", None)


def test_quiet_hours_hold_the_email_while_the_webhook_goes_through_its_endpoint_slot(
    backend, tenant, settings
):
    from tests.delivery.factories import make_endpoint
    from tests.support.http_server import Reply, recording_server

    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    person(tenant, timezone="Europe/Berlin", send_window=WEEKDAYS)
    with recording_server(lambda request: Reply(200)) as server:
        endpoint = make_endpoint(tenant=tenant, url=f"{server.url}/hook")
        row = notification_create(
            tenant=tenant,
            channels=["email", "webhook"],
            subject="S",
            body="B",
            recipients=["ada"],
            webhook_endpoint_id=endpoint.pk,
            now=SATURDAY,
        )

        run_tick(now=SATURDAY)

        assert len(server.received("/hook")) == 1
    assert mail.outbox == []
    row.refresh_from_db()
    assert (row.channel_state, row.next_fire_at, row.error_count) == (
        {"webhook": "delivered"},
        MONDAY_OPENING,
        0,
    )
    logs = dict(Delivery.objects.filter(notification_id=row.pk).values_list("channel", "outcome"))
    assert logs == {"webhook": "delivered", "email": "deferred"}


def test_an_unsubscribe_with_a_key_keeps_only_the_tokens_digest(backend, tenant):
    person(tenant)
    notify(tenant, "ada", category="reminders")
    run_tick(now=SATURDAY)
    token = token_of(mail.outbox[0].message()["List-Unsubscribe"])

    answers = [
        APIClient().post(f"/v1/unsubscribe/{token}", headers={"Idempotency-Key": "one-click"})
        for _ in range(2)
    ]

    assert [answer.status_code for answer in answers] == [204, 204]
    [stored] = OperationKey.objects.filter(key="one-click").values_list("scope", "resource")
    assert token not in "".join(stored)


def test_one_statement_reads_every_claimed_rows_recipients_each_in_its_own_tenant(
    backend, tenant, django_assert_num_queries
):
    other = make_tenant()
    person(tenant, "ada", email="ada@one.example", timezone="Europe/Berlin")
    person(other, "ada", email="ada@two.example")
    person(other, "bob", email="bob@two.example")
    person(tenant, "bob")
    person(other, "eve")
    rows = [notify(tenant, "ada", "bob"), notify(other, "ada"), notify(other, "bob", "eve")]
    Recipient.objects.filter(tenant=tenant, key="bob").delete()
    Recipient.objects.filter(tenant=other, key="eve").delete()
    for row in rows:
        row.refresh_from_db()

    with django_assert_num_queries(1):
        decided = preferences.decisions(rows, now=SATURDAY)

    # Now `bob` exists in the other tenant only, and `eve` nowhere.
    assert [[c.to for c in decided[row.pk].email_copies or []] for row in rows] == [
        ["ada@one.example"],
        ["ada@two.example"],
        ["bob@two.example"],
    ]
