"""One meaning per worker outcome in both queues: run_tick's `failed` counted occurrences
backing off and consume_jobs' `failed` counted dead letters. The counters kept so far are
renamed to the outcome they counted, so /metrics' series go on from their totals."""

from django.db import migrations

RENAMES = [
    ("run_tick", "failed", "backed_off"),
    ("consume_jobs", "retried", "backed_off"),
    ("consume_jobs", "failed", "dead_lettered"),
]


def _rename(renames):
    def rename(apps, schema_editor):
        totals = apps.get_model("dbqueue", "WorkerTotal").objects
        for worker, old, new in renames:
            totals.filter(worker=worker, name=old).update(name=new)

    return rename


class Migration(migrations.Migration):
    dependencies = [("dbqueue", "0006_ratewindow_to_dbtools")]

    operations = [
        migrations.RunPython(
            _rename(RENAMES),
            _rename([(worker, new, old) for worker, old, new in RENAMES]),
            elidable=False,
        ),
    ]
