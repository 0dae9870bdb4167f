"""delivery.transports.registry: the scheduler reaches each channel through its transport
module, and the table names exactly the channels a notification can name."""

import uuid
from datetime import UTC, datetime

from delivery.models import Channel, Notification, WebhookEndpoint
from delivery.scheduler.deliver import Senders, default_senders
from delivery.transports import email, webhook
from delivery.transports.base import DeliveryResult, EmailMessage, WebhookMessage
from delivery.transports.registry import TRANSPORTS
from outbound.categories import ErrorCategory

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def test_every_channel_has_one_transport_and_every_transport_a_channel():
    assert set(TRANSPORTS) == set(Channel.values)
    assert TRANSPORTS[Channel.EMAIL] is email and TRANSPORTS[Channel.WEBHOOK] is webhook


def test_the_default_senders_are_the_transports_own(settings):
    settings.RESEND_API_KEY = ""

    senders = default_senders()

    assert senders.of(Channel.EMAIL) is email.send_email
    assert senders.of(Channel.WEBHOOK).func is webhook.send_webhook
    assert senders.email_batch is None and senders.of("sms") is None


def test_senders_are_named_by_channel():
    def sent(message, *, timeout):
        return DeliveryResult(ok=True)

    assert Senders(email=sent, webhook=sent).of("webhook") is sent


def test_a_rows_email_and_webhook_are_built_by_their_transports():
    row = Notification(channels=["email", "webhook"], email_to=["a@example.com"], subject="s")
    endpoint = WebhookEndpoint(url="https://hooks.example.com/in", secret="whsec_x")

    mails = email.messages(row, endpoint=None, now=NOW, deferred={})
    hooks = webhook.messages(row, endpoint=endpoint, now=NOW, deferred={})

    mail, hook = mails["email:a@example.com"], hooks["webhook"]
    assert isinstance(mail, EmailMessage) and mail.to == ("a@example.com",)
    assert isinstance(hook, WebhookMessage) and hook.url == endpoint.url
    assert hook.msg_id == f"notification_{row.id}_1"
    assert mail.idempotency_key == f"notification_{row.id}_1_a@example.com"


def test_an_email_to_several_addresses_is_one_message_each_and_deferred_ones_wait():
    row = Notification(channels=["email"], email_to=["a@example.com", "b@example.com"])

    mails = email.messages(row, endpoint=None, now=NOW, deferred={"email:b@example.com": NOW})

    assert {unit: m.to for unit, m in mails.items()} == {"email:a@example.com": ("a@example.com",)}


def test_a_webhook_to_a_disabled_or_missing_endpoint_is_a_permanent_failure_unsent():
    row = Notification(channels=["webhook"])
    disabled = WebhookEndpoint(url="https://hooks.example.com/in", secret="x", enabled=False)

    for endpoint, state in ((None, "missing"), (disabled, "disabled")):
        result = webhook.message(row, endpoint=endpoint, now=NOW)
        assert result == DeliveryResult(
            ok=False,
            error=f"webhook endpoint {state}",
            permanent=True,
            category=ErrorCategory.ENDPOINT_DISABLED,
        )


def test_a_message_s_delivery_whose_payload_was_not_loaded_is_never_sent_without_it():
    event = {"type": "invoice.paid", "timestamp": "2026-03-02T09:00:00Z"}
    row = Notification(channels=["webhook"], message_id=uuid.uuid4(), webhook_event=event)
    endpoint = WebhookEndpoint(url="https://hooks.example.com/in", secret="whsec_x")

    assert webhook.message(row, endpoint=endpoint, now=NOW) == DeliveryResult(
        ok=False,
        error="the message's payload was not loaded",
        permanent=False,
        category=ErrorCategory.INTERNAL,
    )
    row.webhook_data = {"id": 7}
    hook = webhook.message(row, endpoint=endpoint, now=NOW)
    assert isinstance(hook, WebhookMessage)
    assert hook.payload == {**event, "data": {"id": 7}}
