"""Migrations that move data: the key store into tenancy, retired secrets into a list."""

import json
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

EXPIRES = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def _migrate_to_the_end():
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_project_keys_move_to_tenancy_with_their_answer_as_bytes_and_the_project_path():
    before = [("projects", "0002_operation_key_status_default"), ("tenancy", "0002_idempotency")]
    apps = _migrate(before)
    tenant = apps.get_model("tenancy", "Tenant").objects.create(name="T")
    project = apps.get_model("projects", "Project").objects.create(tenant=tenant, name="P")
    answer = {"id": str(project.id), "name": "P", "job": {"id": "j", "status": "pending"}}
    apps.get_model("projects", "OperationKey").objects.create(
        tenant=tenant,
        key="k",
        fingerprint="f" * 64,
        project=project,
        response_body=answer,
        expires_at=EXPIRES,
    )

    apps = _migrate([("projects", "0003_idempotency")])
    key = apps.get_model("tenancy", "OperationKey").objects.get()

    assert (key.tenant_id, key.key, key.fingerprint, key.expires_at) == (
        tenant.id,
        "k",
        "f" * 64,
        EXPIRES,
    )
    assert (key.resource, key.response_status) == (f"/v1/projects/{project.id}", 202)
    assert key.response_headers == {"Location": f"/v1/projects/{project.id}"}
    assert json.loads(bytes(key.response_body)) == answer
    _migrate_to_the_end()


@pytest.mark.django_db(transaction=True)
def test_the_previous_secret_becomes_the_first_retired_secret_with_its_grace_end():
    apps = _migrate([("notifications", "0007_email_batches")])
    tenant = apps.get_model("tenancy", "Tenant").objects.create(name="T")
    endpoints = apps.get_model("notifications", "WebhookEndpoint").objects
    rotated = endpoints.create(
        tenant=tenant,
        url="https://h.example.com/",
        secret="whsec_new",
        previous_secret="whsec_old",
        previous_secret_expires_at=EXPIRES,
    )
    fresh = endpoints.create(tenant=tenant, url="https://h.example.com/", secret="whsec_only")

    apps = _migrate([("notifications", "0008_rotation_grace")])
    endpoints = apps.get_model("notifications", "WebhookEndpoint").objects

    assert endpoints.get(pk=rotated.pk).retired_secrets == [
        {"secret": "whsec_old", "until": EXPIRES.isoformat()}
    ]
    assert endpoints.get(pk=fresh.pk).retired_secrets == []
    _migrate_to_the_end()
