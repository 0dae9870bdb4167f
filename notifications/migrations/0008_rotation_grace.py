"""Every secret a rotation retired keeps signing until its own grace ends, not only the
last one: the previous secret and its grace end become the first entry of a list."""

from datetime import datetime

from django.db import migrations, models


def previous_into_retired(apps, schema_editor):
    endpoints = apps.get_model("notifications", "WebhookEndpoint")
    rotated = endpoints.objects.exclude(previous_secret="").exclude(
        previous_secret_expires_at=None
    )
    for endpoint in rotated.iterator(chunk_size=1000):
        endpoint.retired_secrets = [
            {
                "secret": endpoint.previous_secret,
                "until": endpoint.previous_secret_expires_at.isoformat(),
            }
        ]
        endpoint.save(update_fields=["retired_secrets"])


def newest_retired_into_previous(apps, schema_editor):
    endpoints = apps.get_model("notifications", "WebhookEndpoint")
    for endpoint in endpoints.objects.exclude(retired_secrets=[]).iterator(chunk_size=1000):
        newest = endpoint.retired_secrets[0]
        endpoint.previous_secret = newest["secret"]
        endpoint.previous_secret_expires_at = datetime.fromisoformat(newest["until"])
        endpoint.save(update_fields=["previous_secret", "previous_secret_expires_at"])


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0007_email_batches"),
    ]

    operations = [
        migrations.AddField(
            model_name="webhookendpoint",
            name="retired_secrets",
            field=models.JSONField(blank=True, default=list, editable=False),
        ),
        migrations.RunPython(previous_into_retired, newest_retired_into_previous),
        migrations.RemoveField(model_name="webhookendpoint", name="previous_secret"),
        migrations.RemoveField(model_name="webhookendpoint", name="previous_secret_expires_at"),
    ]
