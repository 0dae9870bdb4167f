"""WorkerTotal moves from jobs to dbqueue: the model state is taken over as it is, then its
table is renamed to this app's name (jobs/0006 drops it from the jobs state)."""

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("jobs", "0005_notify_only_ready_jobs"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="WorkerTotal",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("worker", models.CharField(max_length=32)),
                        ("name", models.CharField(max_length=32)),
                        ("total", models.BigIntegerField(default=0)),
                        ("updated_at", models.DateTimeField(default=django.utils.timezone.now)),
                    ],
                    options={
                        "db_table": "jobs_workertotal",
                        "constraints": [models.UniqueConstraint(fields=("worker", "name"), name="worker_total_unique")],
                    },
                ),
            ],
        ),
        migrations.AlterModelTable(name="workertotal", table=None),
    ]
