"""The index a claim walks on PostgreSQL from one tenant with rows on their schedule to
the next (dbqueue.ranking, ClaimSpec.groups), taking each tenant's first due rows in claim
order. SQLite's claim ranks the due rows it finds through notification_due_idx, and given
this index its planner would scan every scheduled row instead: the index is PostgreSQL's
only."""

from django.db import migrations, models

CONDITION = "state IN ('scheduled', 'backing_off')"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            "CREATE INDEX notification_tenant_due_idx ON notifications_notification "
            f"(tenant_id, next_fire_at, id) WHERE {CONDITION}"
        )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS notification_tenant_due_idx")


class Migration(migrations.Migration):
    dependencies = [
        ("delivery", "0007_endpoint_description"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddIndex(
                    model_name="notification",
                    index=models.Index(
                        condition=models.Q(("state__in", ["scheduled", "backing_off"])),
                        fields=["tenant", "next_fire_at", "id"],
                        name="notification_tenant_due_idx",
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(create, drop)],
        ),
    ]
