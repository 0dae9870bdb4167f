"""Migration 0004: existing rows get due_at from next_fire_at; parked rows stay NULL."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("notifications", "0003_endpoint_circuit_and_channel_state")]
AFTER = [("notifications", "0004_lateness")]
DUE = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


@pytest.mark.django_db(transaction=True)
def test_due_at_is_filled_from_next_fire_at():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    apps = executor.loader.project_state(BEFORE).apps
    tenant = apps.get_model("tenancy", "Tenant").objects.create(name="T")
    notification = apps.get_model("notifications", "Notification")
    scheduled = notification.objects.create(tenant=tenant, next_fire_at=DUE)
    parked = notification.objects.create(tenant=tenant, next_fire_at=None)

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    apps = executor.loader.project_state(AFTER).apps
    rows = apps.get_model("notifications", "Notification").objects

    assert rows.get(pk=scheduled.pk).due_at == DUE
    assert rows.get(pk=parked.pk).due_at is None
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
