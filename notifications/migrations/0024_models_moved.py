from django.db import migrations

# Where each moved model now lives: its content type follows, so the admin's history and the
# permissions granted on it (support staff's groups) stay attached.
MOVED = {
    "webhookendpoint": "delivery",
    "emailbatch": "delivery",
    "notification": "delivery",
    "delivery": "delivery",
    "eventtype": "webhooks",
    "message": "webhooks",
    "recipient": "people",
    "digest": "people",
}


def content_types_moved(apps, schema_editor):
    content_types = apps.get_model("contenttypes", "ContentType").objects
    for model, app_label in MOVED.items():
        if not content_types.filter(app_label=app_label, model=model).exists():
            content_types.filter(app_label="notifications", model=model).update(app_label=app_label)


def content_types_returned(apps, schema_editor):
    content_types = apps.get_model("contenttypes", "ContentType").objects
    for model, app_label in MOVED.items():
        if not content_types.filter(app_label="notifications", model=model).exists():
            content_types.filter(app_label=app_label, model=model).update(app_label="notifications")


class Migration(migrations.Migration):
    """Every model of notifications now lives in delivery, webhooks or people (DESIGN §17)."""

    dependencies = [
        ("people", "0001_initial"),
        ("webhooks", "0001_initial"),
        ("delivery", "0002_initial"),
        ("notifications", "0023_people"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            # The tables stay as they are: they now belong to the models' new apps.
            state_operations=[
                migrations.RemoveField(
                    model_name="digest",
                    name="notification",
                ),
                migrations.RemoveField(
                    model_name="digest",
                    name="tenant",
                ),
                migrations.RemoveField(
                    model_name="notification",
                    name="email_batch",
                ),
                migrations.RemoveField(
                    model_name="eventtype",
                    name="tenant",
                ),
                migrations.RemoveField(
                    model_name="message",
                    name="tenant",
                ),
                migrations.RemoveField(
                    model_name="notification",
                    name="message",
                ),
                migrations.RemoveField(
                    model_name="notification",
                    name="project",
                ),
                migrations.RemoveField(
                    model_name="notification",
                    name="tenant",
                ),
                migrations.RemoveField(
                    model_name="notification",
                    name="webhook_endpoint",
                ),
                migrations.RemoveField(
                    model_name="recipient",
                    name="tenant",
                ),
                migrations.RemoveField(
                    model_name="webhookendpoint",
                    name="tenant",
                ),
                migrations.DeleteModel(
                    name="Delivery",
                ),
                migrations.DeleteModel(
                    name="Digest",
                ),
                migrations.DeleteModel(
                    name="EmailBatch",
                ),
                migrations.DeleteModel(
                    name="EventType",
                ),
                migrations.DeleteModel(
                    name="Message",
                ),
                migrations.DeleteModel(
                    name="Notification",
                ),
                migrations.DeleteModel(
                    name="Recipient",
                ),
                migrations.DeleteModel(
                    name="WebhookEndpoint",
                ),
            ],
            database_operations=[migrations.RunPython(content_types_moved, content_types_returned)],
        ),
    ]
