"""The Idempotency-Key store moves to tenancy (every POST's, not only the project create's).

A new table rather than a renamed one: the stored answer changes form (the JSON document
becomes the exact bytes sent, and a project foreign key becomes the resource's path, since
the store can no longer know projects). Existing keys are copied over so their retries still
replay: each answer is rendered as the API renders JSON (compact, in its stored key order).
"""

import json

from django.db import migrations

_BATCH = 1000


def _rendered(body):
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def copy_keys_to_tenancy(apps, schema_editor):
    old_keys = apps.get_model("projects", "OperationKey")
    new_keys = apps.get_model("tenancy", "OperationKey")
    batch = []
    for old in old_keys.objects.order_by("pk").iterator(chunk_size=_BATCH):
        resource = f"/v1/projects/{old.response_body['id']}"
        batch.append(
            new_keys(
                tenant_id=old.tenant_id,
                key=old.key,
                fingerprint=old.fingerprint,
                resource=resource,
                response_status=old.response_status,
                response_headers={"Location": resource},
                response_body=_rendered(old.response_body),
                created_at=old.created_at,
                expires_at=old.expires_at,
            )
        )
        if len(batch) == _BATCH:
            new_keys.objects.bulk_create(batch)
            batch = []
    new_keys.objects.bulk_create(batch)


def copy_project_keys_back(apps, schema_editor):
    old_keys = apps.get_model("projects", "OperationKey")
    new_keys = apps.get_model("tenancy", "OperationKey")
    project_keys = new_keys.objects.filter(
        resource__startswith="/v1/projects/", response_body__isnull=False
    )
    old_keys.objects.bulk_create(
        old_keys(
            tenant_id=new.tenant_id,
            key=new.key,
            fingerprint=new.fingerprint,
            response_status=new.response_status,
            response_body=json.loads(bytes(new.response_body)),
            created_at=new.created_at,
            expires_at=new.expires_at,
        )
        for new in project_keys.iterator(chunk_size=_BATCH)
    )


class Migration(migrations.Migration):
    dependencies = [
        ("projects", "0002_operation_key_status_default"),
        ("tenancy", "0002_idempotency"),
    ]

    operations = [
        migrations.RunPython(copy_keys_to_tenancy, copy_project_keys_back),
        migrations.DeleteModel(name="OperationKey"),
    ]
