"""Migration 0010: existing rows get MAX_ATTEMPTS as their own limit and the state the
model used to derive from their columns."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("notifications", "0009_invalid_schedule")]
AFTER = [("notifications", "0010_stored_state")]
DUE = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_state_and_max_attempts_are_filled_from_the_columns(settings):
    settings.NOTIFICATION_MAX_ATTEMPTS = 3
    apps = _migrate(BEFORE)
    tenant = apps.get_model("tenancy", "Tenant").objects.create(name="T")
    rows = apps.get_model("notifications", "Notification").objects
    columns = {
        "scheduled": {"next_fire_at": DUE},
        "backing_off": {"next_fire_at": DUE, "error_count": 2},
        "at_the_limit": {"next_fire_at": DUE, "error_count": 3},
        "without_a_next_fire": {"next_fire_at": None},
        "dead_lettered": {
            "next_fire_at": None,
            "error_count": 3,
            "dead_letter_reason": "exhausted",
        },
    }
    ids = {name: rows.create(tenant=tenant, **values).pk for name, values in columns.items()}

    apps = _migrate(AFTER)
    migrated = apps.get_model("notifications", "Notification").objects

    states = {name: migrated.get(pk=pk).state for name, pk in ids.items()}
    assert states == {
        "scheduled": "scheduled",
        "backing_off": "backing_off",
        "at_the_limit": "parked",
        "without_a_next_fire": "parked",
        "dead_lettered": "dead_lettered",
    }
    assert set(migrated.values_list("max_attempts", flat=True)) == {3}
    assert migrated.get(pk=ids["scheduled"]).next_fire_at == DUE
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
