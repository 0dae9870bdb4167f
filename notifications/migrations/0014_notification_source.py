"""Who made each notification: `api` (a client, through the API) or `system` (the product's
own announcements and account e-mails). Rows made before the column: the product's carry a
source key (a job's announcements) or sit in the account-mail tenant (signup and invitation
e-mails); every other row was made through the API."""

from django.db import migrations, models

# tenancy.front_door.ACCOUNT_MAIL_TENANT_ID; a migration keeps the value it was written with.
ACCOUNT_MAIL_TENANT_ID = "00000000-0000-4000-8000-00000000a11c"


def mark_system_rows(apps, schema_editor) -> None:
    notification = apps.get_model("notifications", "Notification")
    notification.objects.filter(
        models.Q(source_key__isnull=False) | models.Q(tenant_id=ACCOUNT_MAIL_TENANT_ID)
    ).update(source="system")


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0013_endpoint_failed_deliveries"),
    ]

    operations = [
        migrations.AddField(
            model_name="notification",
            name="source",
            field=models.CharField(
                choices=[("api", "API"), ("system", "System")],
                default="api",
                editable=False,
                max_length=8,
            ),
        ),
        migrations.RunPython(mark_system_rows, migrations.RunPython.noop, elidable=True),
    ]
