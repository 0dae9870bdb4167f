"""Migration 0011: the live links in account emails queued before link tokens were derived at
send time are replaced by a placeholder, in their bodies and in their recorded batches; no
other tenant's email changes."""

import importlib
import json
import secrets

import pytest
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.utils import timezone

from delivery.models import EmailBatch, Notification
from delivery.transports.base import EmailMessage
from delivery.transports.resend import batch_body
from tenancy.front_door import account_mail_tenant
from tests.delivery.factories import make_notification, make_tenant

migration = importlib.import_module("notifications.migrations.0011_account_mail_links_removed")

pytestmark = pytest.mark.django_db


def body_with(token: str) -> str:
    return f"Accept the invitation:\n\nhttps://app.example.com/join?token={token}\n\nOnce."


def test_live_links_leave_account_emails_and_their_batch_and_nothing_else_changes():
    token, other = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    due = timezone.now()
    mail = make_notification(
        tenant=account_mail_tenant(), channels=["email"], next_fire_at=due, body=body_with(token)
    )
    theirs = make_notification(
        tenant=make_tenant(), channels=["email"], next_fire_at=due, body=body_with(other)
    )
    rows = [mail, theirs]
    batch = EmailBatch.objects.create(
        body=batch_body([EmailMessage(("a@example.com",), "s", r.body, "k") for r in rows]),
        members=[f"{r.pk}/1" for r in rows],
    )

    # The models as the migration saw them (they have since moved to delivery).
    state = MigrationLoader(connection).project_state(
        ("notifications", "0011_account_mail_links_removed")
    )
    migration.remove_live_links(state.apps, None)

    mail.refresh_from_db()
    assert mail.body == ("Accept the invitation:\n\n[link removed: ask for a new one]\n\nOnce.")
    assert Notification.objects.get(pk=theirs.pk).body == body_with(other)
    texts = [email["text"] for email in json.loads(EmailBatch.objects.get(pk=batch.pk).body)]
    assert texts == [mail.body, body_with(other)]
    assert token not in EmailBatch.objects.get(pk=batch.pk).body
