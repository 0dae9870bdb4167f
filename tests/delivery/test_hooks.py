"""delivery.hooks: products observe the engine through hooks they register at start-up, and
what they decide comes back as values the engine applies to the attempt at hand."""

from datetime import UTC, datetime

import pytest

from delivery import hooks
from delivery.copies import EmailCopy
from delivery.hooks import SUPPRESSED, SendDecision, WriteBackOutcomes
from delivery.models import Notification
from people.sending import on_claimed
from webhooks.lifecycle import after_write_back
from webhooks.messages import payloads_for_claimed

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def row(**fields) -> Notification:
    return Notification(channels=["email", "webhook"], body="stored", **fields)


def test_the_products_register_their_hooks_at_start_up():
    assert on_claimed in hooks._on_claimed
    assert payloads_for_claimed in hooks._on_claimed
    assert after_write_back in hooks._after_write_back


def test_a_decision_applies_to_its_row_only_and_settles_the_channels_it_suppresses():
    decided, untouched = row(), row()
    copy = EmailCopy(
        key="ada",
        to="ada@example.com",
        headers=(("List-Unsubscribe", "<https://u.example/{{unsubscribe:x}}>"),),
        wait=NOW,
    )
    decision = SendDecision(
        body="3 updates",
        email_copies=[copy],
        suppressed_channels={"webhook": "preference", "email:eve": "preference"},
    )

    hooks.decided([decided, untouched], {decided.pk: decision})

    assert decided.body == "3 updates"
    assert decided.email_copies == [copy]
    assert dict(decided.suppressed_channels) == {
        "webhook": "preference",
        "email:eve": "preference",
    }
    assert decided.channel_state == {"webhook": SUPPRESSED, "email:eve": SUPPRESSED}
    assert untouched.body == "stored"
    assert (untouched.email_copies, dict(untouched.suppressed_channels)) == (None, {})
    assert untouched.channel_state == {}


def test_a_copy_settled_earlier_in_the_occurrence_is_not_suppressed_again():
    sent = row(channel_state={"email:ada": "delivered"})

    hooks.decided([sent], {sent.pk: SendDecision(suppressed_channels={"email:ada": "preference"})})

    assert (sent.channel_state, dict(sent.suppressed_channels)) == ({"email:ada": "delivered"}, {})


def test_a_default_decision_leaves_the_rows_content_as_stored():
    kept = row(email_to=["bob@example.com"])

    hooks.decided([kept], {kept.pk: SendDecision()})

    assert (kept.body, kept.email_to, kept.channel_state) == ("stored", ["bob@example.com"], {})
    assert kept.email_copies is None


def test_each_product_s_decision_leaves_what_another_decided_for_the_row():
    shared = row()
    copies = [EmailCopy(key="ada", to="ada@example.com")]

    hooks.decided([shared], {shared.pk: SendDecision(email_copies=copies)})
    hooks.decided([shared], {shared.pk: SendDecision(webhook_data={"id": 7})})

    assert (shared.email_copies, shared.webhook_data) == (copies, {"id": 7})


def test_every_registered_hook_is_asked_about_the_claimed_rows(monkeypatch):
    seen = []
    monkeypatch.setattr(hooks, "_on_claimed", [])
    hooks.register_on_claimed(lambda rows, now: seen.append((list(rows), now)) or {})
    rows = [row()]

    hooks.claimed(rows, now=NOW)
    hooks.claimed([], now=NOW)

    assert seen == [(rows, NOW)]


def test_a_write_back_that_settled_nothing_tells_no_product(monkeypatch):
    told = []
    monkeypatch.setattr(hooks, "_after_write_back", [])
    hooks.register_after_write_back(lambda outcomes, now: told.append(outcomes))

    hooks.written_back(WriteBackOutcomes(), now=NOW)
    hooks.written_back(WriteBackOutcomes(dead_lettered=["row"]), now=NOW)

    assert told == [WriteBackOutcomes(dead_lettered=["row"])]


@pytest.mark.django_db
def test_without_a_publisher_an_announcement_puts_its_emails_and_publishes_nothing(
    monkeypatch, tenant
):
    from delivery import outbox

    monkeypatch.setattr(outbox, "_publisher", [])
    announcement = outbox.Announcement(
        addresses=["ada@example.com"],
        email_subject="Ready",
        email_body="Your project is ready.",
        event={"type": "project.active", "data": {}},
    )

    outbox.announce([outbox.Announced(tenant.id, None, "k", announcement)], now=NOW)

    assert list(Notification.objects.values_list("channels", "email_to")) == [
        (["email"], ["ada@example.com"])
    ]


@pytest.mark.django_db
def test_without_a_directory_every_recipient_key_is_unknown(monkeypatch, tenant):
    from delivery import validation

    monkeypatch.setattr(validation, "_directories", [])

    assert validation.unknown_keys(tenant=tenant, keys=["ada", "bob"]) == ["ada", "bob"]


def test_without_a_joiner_a_digest_is_refused_as_bad_input(monkeypatch):
    from delivery import outbox
    from web.errors import InvalidInput

    monkeypatch.setattr(outbox, "_digest_joiner", [])

    with pytest.raises(InvalidInput) as refused:
        outbox.digest_join(recipient_key="ada", key="k")

    assert refused.value.errors == {"digest": ["Digests are not available."]}
