"""The job statuses say what they mean: `enqueued` (claimed, its lease running) is `running`
and `failed` (the dead letter) is `dead_lettered`, the notifications' word for it. Stored
rows are rewritten both ways, and the partial ready index and the status check, which name
the values, are built again around the rewrite. The NOTIFY trigger of 0005 names only
`pending`, which keeps its name."""

from django.db import migrations, models

RENAMES = {"enqueued": "running", "failed": "dead_lettered"}


def _rewrite(names):
    def rewrite(apps, schema_editor):
        jobs = apps.get_model("jobs", "Job").objects
        for old, new in names.items():
            jobs.filter(status=old).update(status=new)

    return rewrite


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0010_vocabulary"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="job", name="job_status_valid"),
        migrations.RemoveIndex(model_name="job", name="job_ready_idx"),
        migrations.AlterField(
            model_name="job",
            name="status",
            field=models.CharField(
                choices=[
                    ("pending", "Pending"),
                    ("running", "Running (claimed, lease running)"),
                    ("completed", "Completed"),
                    ("dead_lettered", "Dead-lettered"),
                ],
                default="pending",
                max_length=16,
            ),
        ),
        migrations.RunPython(
            _rewrite(RENAMES),
            _rewrite({new: old for old, new in RENAMES.items()}),
            elidable=False,
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(("status__in", ["pending", "running"])),
                fields=["next_attempt_at"],
                name="job_ready_idx",
            ),
        ),
        migrations.AddConstraint(
            model_name="job",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("status__in", ["pending", "running", "completed", "dead_lettered"])
                ),
                name="job_status_valid",
            ),
        ),
    ]
