"""An endpoint switched off through the API now records why: `disabled_reason` "manual",
which the API used to answer for an empty reason. Existing ones get it too, so the admin
shows and filters by it."""

from django.db import migrations


def name_manual_disables(apps, schema_editor):
    endpoints = apps.get_model("delivery", "WebhookEndpoint")
    endpoints.objects.filter(enabled=False, disabled_reason="").update(disabled_reason="manual")


def unname_manual_disables(apps, schema_editor):
    endpoints = apps.get_model("delivery", "WebhookEndpoint")
    endpoints.objects.filter(enabled=False, disabled_reason="manual").update(disabled_reason="")


class Migration(migrations.Migration):
    dependencies = [
        ("webhooks", "0004_portal_sessions"),
        ("delivery", "0007_endpoint_description"),
    ]

    operations = [migrations.RunPython(name_manual_disables, unname_manual_disables)]
