"""A completed or failed job has no next attempt: `next_attempt_at` becomes nullable and is
cleared on the finished rows, which showed a time that would never come."""

import django.utils.timezone
from django.db import migrations, models

FINISHED = ("completed", "failed")


def clear_finished(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    Job.objects.filter(status__in=FINISHED).update(next_attempt_at=None)


def fill_finished(apps, schema_editor):
    # The column turns NOT NULL again on the way back; any time will do for finished rows.
    Job = apps.get_model("jobs", "Job")
    Job.objects.filter(next_attempt_at__isnull=True).update(next_attempt_at=models.F("updated_at"))


class Migration(migrations.Migration):
    dependencies = [("jobs", "0006_worker_totals_moved")]

    operations = [
        migrations.AlterField(
            model_name="job",
            name="next_attempt_at",
            field=models.DateTimeField(blank=True, default=django.utils.timezone.now, null=True),
        ),
        migrations.RunPython(clear_finished, fill_finished, elidable=True),
    ]
