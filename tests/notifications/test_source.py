"""Notifications carry `source`: `api` for what a client made, `system` for the product's own
e-mails and account e-mails; `?source=` filters the list, and account e-mails never reach a
tenant's list (nor do the product's announcements, messages whose deliveries the messages
list). Migration 0014 gives existing rows theirs."""

import importlib
import uuid

import pytest
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.utils import timezone

from dbqueue.clock import Clock
from delivery import outbox
from delivery.models import Notification
from jobs.consumer import jobs_drain
from tenancy.front_door import account_mail_tenant
from tests.delivery.factories import make_notification, make_tenant
from tests.jobs.factories import make_endpoint
from tests.projects.factories import make_project

migration = importlib.import_module("notifications.migrations.0014_notification_source")

EMAIL = {"channels": ["email"], "email_to": ["ops@example.com"], "subject": "Hi", "body": "B"}


def _create(actor):
    response = actor.client().post(
        "/v1/notifications", EMAIL, format="json", headers={"Idempotency-Key": str(uuid.uuid4())}
    )
    assert response.status_code == 201
    return response.json()


def _activate_a_project(actor):
    """A project whose create and provisioning announced it: the project.created and
    project.active messages (a project made without `invite` e-mails nobody)."""
    make_endpoint(actor.tenant)
    make_project(actor)
    jobs_drain(clock=Clock(now=timezone.now()), limit=10, max_seconds=10)


def test_a_notification_made_through_the_api_is_api(alice):
    created = _create(alice)

    assert created["source"] == "api"
    assert alice.client().get(f"/v1/notifications/{created['id']}").json()["source"] == "api"


def test_the_products_e_mails_are_system_and_the_filter_tells_them_apart(alice, settings):
    settings.PROVISIONING_URL = ""
    mine = _create(alice)
    _activate_a_project(alice)  # its announcements are messages': listed with them, not here
    announcement = outbox.email(
        tenant_id=alice.tenant.id,
        address="owner@example.com",
        subject="An endpoint was disabled",
        body="B",
        now=timezone.now(),
    )
    client = alice.client()

    listed = client.get("/v1/notifications").json()["results"]
    api = client.get("/v1/notifications?source=api").json()["results"]
    system = client.get("/v1/notifications?source=system").json()["results"]

    assert Notification.objects.filter(tenant=alice.tenant, message__isnull=False).count() == 2
    assert {row["id"] for row in listed} == {mine["id"], str(announcement.id)}
    assert [row["id"] for row in api] == [mine["id"]]
    assert [(row["id"], row["source"]) for row in system] == [(str(announcement.id), "system")]


def test_source_combines_with_state_and_refuses_an_unknown_value(alice):
    _create(alice)
    client = alice.client()

    both = client.get("/v1/notifications?source=api&state=scheduled")
    wrong = client.get("/v1/notifications?source=mine")
    twice = client.get("/v1/notifications?source=api&source=system")

    assert both.status_code == 200 and len(both.json()["results"]) == 1
    assert wrong.status_code == 400 and "source" in wrong.json()["errors"]
    assert twice.status_code == 400 and "source" in twice.json()["errors"]


def test_source_is_read_only(alice):
    response = alice.client().post(
        "/v1/notifications",
        {**EMAIL, "source": "system"},
        format="json",
        headers={"Idempotency-Key": "k"},
    )

    assert response.status_code == 400
    assert "source" in response.json()["errors"]


def test_account_emails_are_system_and_never_in_a_tenants_list(alice):
    response = alice.client().post(
        "/v1/invitations",
        {"email": "new@example.com", "role": "member"},
        format="json",
        headers={"Idempotency-Key": "i"},
    )
    assert response.status_code == 201

    [mail] = Notification.objects.filter(email_to=["new@example.com"])
    assert mail.source == "system"
    assert mail.tenant_id == account_mail_tenant().id
    for query in ("", "?source=system", "?source=api"):
        listed = alice.client().get(f"/v1/notifications{query}").json()["results"]
        assert str(mail.id) not in {row["id"] for row in listed}


@pytest.mark.django_db
def test_the_migration_marks_the_products_rows_system_and_the_rest_api():
    now = timezone.now()
    tenant = make_tenant()
    made = make_notification(tenant=tenant, next_fire_at=now)
    announced = make_notification(tenant=tenant, next_fire_at=now, source_key="job:1:event:2")
    account = make_notification(tenant=account_mail_tenant(), next_fire_at=now)
    Notification.objects.update(source="api")

    # The models as the migration saw them (they have since moved to delivery).
    state = MigrationLoader(connection).project_state(("notifications", "0014_notification_source"))
    migration.mark_system_rows(state.apps, None)

    sources = dict(Notification.objects.values_list("pk", "source"))
    assert sources == {made.pk: "api", announced.pk: "system", account.pk: "system"}
