"""PostgreSQL only: wake `consume_jobs --loop` workers when jobs are committed.

A statement-level trigger runs pg_notify('tickwork_jobs', '') after an INSERT or an UPDATE
of `status` on the jobs table; PostgreSQL delivers it at commit (once per transaction),
so a listening worker claims new or retried work at once instead of at its next poll.
SQLite has no LISTEN/NOTIFY: its workers simply poll.
"""

from django.db import migrations

CHANNEL = "tickwork_jobs"

CREATE = [
    f"""CREATE OR REPLACE FUNCTION tickwork_jobs_notify() RETURNS trigger AS $$
    BEGIN
        PERFORM pg_notify('{CHANNEL}', '');
        RETURN NULL;
    END;
    $$ LANGUAGE plpgsql""",
    "DROP TRIGGER IF EXISTS tickwork_jobs_notify ON jobs_job",
    """CREATE TRIGGER tickwork_jobs_notify
    AFTER INSERT OR UPDATE OF status ON jobs_job
    FOR EACH STATEMENT EXECUTE FUNCTION tickwork_jobs_notify()""",
]

DROP = [
    "DROP TRIGGER IF EXISTS tickwork_jobs_notify ON jobs_job",
    "DROP FUNCTION IF EXISTS tickwork_jobs_notify()",
]


def _run_on_postgresql(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            for statement in statements:
                schema_editor.execute(statement, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [("jobs", "0002_error_categories")]

    operations = [
        migrations.RunPython(_run_on_postgresql(CREATE), _run_on_postgresql(DROP), elidable=False),
    ]
