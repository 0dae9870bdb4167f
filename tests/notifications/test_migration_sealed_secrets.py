"""Migration 0012: the signing secrets stored in plain (the current one and those a rotation
retired) are sealed, and the product reads them back as they were; reversed, they are plain
again."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from web.sealed import is_sealed

BEFORE = [("notifications", "0011_account_mail_links_removed")]
AFTER = [("notifications", "0012_sealed_signing_secrets")]
CURRENT = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
RETIRED = "whsec_b2xkLXNlY3JldC1zdGlsbC1pbi1ncmFjZQ=="


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def _stored(endpoint_id):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT secret, retired_secrets FROM notifications_webhookendpoint WHERE id = %s",
            [endpoint_id.hex if connection.vendor == "sqlite" else endpoint_id],
        )
        return cursor.fetchone()


@pytest.mark.django_db(transaction=True)
def test_plain_secrets_are_sealed_and_read_back_as_they_were():
    apps = _migrate(BEFORE)
    tenant = apps.get_model("tenancy", "Tenant").objects.create(name="T")
    endpoint = apps.get_model("notifications", "WebhookEndpoint").objects.create(
        tenant=tenant,
        url="https://hooks.example.com/in",
        secret=CURRENT,
        retired_secrets=[{"secret": RETIRED, "until": "2030-01-01T00:00:00+00:00"}],
    )

    apps = _migrate(AFTER)

    stored_secret, stored_retired = _stored(endpoint.pk)
    assert is_sealed(stored_secret) and CURRENT not in stored_secret
    assert RETIRED not in str(stored_retired)
    migrated = apps.get_model("notifications", "WebhookEndpoint").objects.get(pk=endpoint.pk)
    assert migrated.secret == CURRENT
    assert migrated.retired_secrets == [{"secret": RETIRED, "until": "2030-01-01T00:00:00+00:00"}]

    _migrate(BEFORE)
    assert _stored(endpoint.pk)[0] == CURRENT

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
