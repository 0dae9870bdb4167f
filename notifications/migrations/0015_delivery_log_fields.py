"""The delivery log's rows carry their webhook endpoint, their attempt and when they were
written. Rows logged before: `created_at` is their `attempted_at`, a webhook row's
`endpoint_id` the endpoint its notification points at now (if it still exists), and
`attempt` stays NULL (it was never recorded)."""

import django.utils.timezone
from django.db import migrations, models


def fill_existing_rows(apps, schema_editor) -> None:
    delivery = apps.get_model("notifications", "Delivery")
    notification = apps.get_model("notifications", "Notification")
    delivery.objects.update(created_at=models.F("attempted_at"))
    endpoint = notification.objects.filter(pk=models.OuterRef("notification_id")).values(
        "webhook_endpoint_id"
    )[:1]
    delivery.objects.exclude(channel="email").update(endpoint_id=models.Subquery(endpoint))


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0014_notification_source"),
    ]

    operations = [
        migrations.AddField(
            model_name="delivery",
            name="attempt",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="delivery",
            name="created_at",
            field=models.DateTimeField(default=django.utils.timezone.now),
        ),
        migrations.AddField(
            model_name="delivery",
            name="endpoint_id",
            field=models.UUIDField(blank=True, null=True),
        ),
        migrations.RunPython(fill_existing_rows, migrations.RunPython.noop, elidable=True),
    ]
