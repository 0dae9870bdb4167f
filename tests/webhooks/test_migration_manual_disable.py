"""Endpoints switched off by hand before the API recorded why get `disabled_reason`
"manual" from the migration, and lose it again when it is reversed; other reasons stay."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

DELIVERY = ("delivery", "0007_endpoint_description")
BEFORE = [("webhooks", "0004_portal_sessions"), DELIVERY]
AFTER = [("webhooks", "0005_manually_disabled_reason"), DELIVERY]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_manual_disables_are_named_and_the_move_reverses():
    apps = _migrate(BEFORE)
    tenant = apps.get_model("tenancy", "Tenant").objects.create(name="T")
    endpoints = apps.get_model("delivery", "WebhookEndpoint").objects
    common = {"tenant": tenant, "url": "https://hooks.example.com/in", "secret": "whsec_x"}
    by_hand = endpoints.create(**common, enabled=False, disabled_reason="")
    failing = endpoints.create(**common, enabled=False, disabled_reason="failing")
    enabled = endpoints.create(**common)
    try:
        apps = _migrate(AFTER)
        endpoints = apps.get_model("delivery", "WebhookEndpoint").objects
        reasons = dict(endpoints.values_list("pk", "disabled_reason"))
        assert reasons == {by_hand.pk: "manual", failing.pk: "failing", enabled.pk: ""}

        apps = _migrate(BEFORE)
        endpoints = apps.get_model("delivery", "WebhookEndpoint").objects
        assert endpoints.get(pk=by_hand.pk).disabled_reason == ""
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
