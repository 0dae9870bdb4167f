"""WorkerTotal now belongs to dbqueue (dbqueue/0001 takes over its table)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0005_notify_only_ready_jobs"),
        ("dbqueue", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="WorkerTotal")],
        ),
    ]
