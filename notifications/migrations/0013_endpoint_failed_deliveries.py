"""An endpoint's failed deliveries since its last success, whatever failed them (a 4xx
included), so one that refuses every delivery reads `failing`. Until now only transport
failures were counted: an endpoint starts from those."""

from django.db import migrations, models


def from_transport_failures(apps, schema_editor) -> None:
    endpoint = apps.get_model("notifications", "WebhookEndpoint")
    endpoint.objects.filter(consecutive_failures__gt=0).update(
        failed_deliveries=models.F("consecutive_failures")
    )


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0012_sealed_signing_secrets"),
    ]

    operations = [
        migrations.AddField(
            model_name="webhookendpoint",
            name="failed_deliveries",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(from_transport_failures, migrations.RunPython.noop, elidable=True),
    ]
