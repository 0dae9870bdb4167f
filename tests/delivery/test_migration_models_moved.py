"""The models of notifications moved to delivery, webhooks and people (DESIGN §17) by state
alone: on a populated database the rows stay where they were, the moved models read them,
their content types (and so the admin's history and granted permissions) follow them, and
the move reverses."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

CONTENT_TYPES = ("contenttypes", "0002_remove_content_type_name")
BEFORE = [("notifications", "0023_people"), CONTENT_TYPES]
AFTER = [("notifications", "0024_models_moved"), CONTENT_TYPES]
MOVED = {
    "delivery": ["webhookendpoint", "emailbatch", "notification", "delivery"],
    "webhooks": ["eventtype", "message"],
    "people": ["recipient", "digest"],
}


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def _to_latest():
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_a_populated_database_moves_forward_and_back_without_copying_a_row():
    apps = _migrate(BEFORE)
    content_types = apps.get_model("contenttypes", "ContentType").objects
    for models in MOVED.values():
        for model in models:
            content_types.get_or_create(app_label="notifications", model=model)
    tenant = apps.get_model("tenancy", "Tenant").objects.create(name="T")
    old = {
        name: apps.get_model("notifications", name)
        for name in (
            "WebhookEndpoint",
            "Message",
            "Notification",
            "Recipient",
            "Digest",
            "EventType",
            "Delivery",
        )
    }
    endpoint = old["WebhookEndpoint"].objects.create(
        tenant=tenant, url="https://hooks.example.com/in", secret="whsec_x"
    )
    message = old["Message"].objects.create(tenant=tenant, event_type="invoice.paid")
    notification = old["Notification"].objects.create(
        tenant=tenant, channels=["webhook"], webhook_endpoint=endpoint, message=message
    )
    old["Recipient"].objects.create(tenant=tenant, key="ada", email="ada@example.com")
    old["Digest"].objects.create(
        tenant=tenant,
        recipient_key="ada",
        key="k",
        closes_at="2030-01-01T00:00:00Z",
        notification=notification,
    )
    old["EventType"].objects.create(tenant=tenant, name="invoice.paid")
    old["Delivery"].objects.create(
        tenant=tenant,
        notification_id=notification.pk,
        occurrence=1,
        channel="webhook",
        outcome="delivered",
    )

    try:
        apps = _migrate(AFTER)

        moved = apps.get_model("delivery", "Notification").objects.get(pk=notification.pk)
        assert moved.webhook_endpoint_id == endpoint.pk
        assert moved.message_id == message.pk
        assert apps.get_model("webhooks", "Message").objects.get().event_type == "invoice.paid"
        assert apps.get_model("people", "Digest").objects.get().notification_id == moved.pk
        assert apps.get_model("people", "Recipient").objects.get().key == "ada"
        assert apps.get_model("webhooks", "EventType").objects.filter(name="invoice.paid")
        assert apps.get_model("delivery", "Delivery").objects.get().outcome == "delivered"
        content_types = apps.get_model("contenttypes", "ContentType").objects
        assert not content_types.filter(app_label="notifications")
        for app_label, models in MOVED.items():
            # Models added since (an application) are the app's own, not moved ones.
            assert set(models) <= set(
                content_types.filter(app_label=app_label).values_list("model", flat=True)
            )

        apps = _migrate(BEFORE)

        assert apps.get_model("notifications", "Notification").objects.get().pk == moved.pk
        content_types = apps.get_model("contenttypes", "ContentType").objects
        assert content_types.filter(app_label="notifications").count() == 8
    finally:
        _to_latest()
