"""PostgreSQL only: notify `consume_jobs --loop` workers only when a job becomes pending.

The statement trigger of 0003 also fired on claims (pending → enqueued) and completions,
so every batch woke idle workers for one empty claim query. A row trigger with
`WHEN (NEW.status = 'pending')` fires for new jobs, retries and backoffs only;
PostgreSQL still folds the identical notifications of one transaction into one.
"""

from django.db import migrations

CHANNEL = "tickwork_jobs"

ROW_TRIGGER = [
    f"""CREATE OR REPLACE FUNCTION tickwork_jobs_notify() RETURNS trigger AS $$
    BEGIN
        PERFORM pg_notify('{CHANNEL}', '');
        RETURN NULL;
    END;
    $$ LANGUAGE plpgsql""",
    "DROP TRIGGER IF EXISTS tickwork_jobs_notify ON jobs_job",
    """CREATE TRIGGER tickwork_jobs_notify
    AFTER INSERT OR UPDATE OF status ON jobs_job
    FOR EACH ROW WHEN (NEW.status = 'pending') EXECUTE FUNCTION tickwork_jobs_notify()""",
]

STATEMENT_TRIGGER = [
    "DROP TRIGGER IF EXISTS tickwork_jobs_notify ON jobs_job",
    """CREATE TRIGGER tickwork_jobs_notify
    AFTER INSERT OR UPDATE OF status ON jobs_job
    FOR EACH STATEMENT EXECUTE FUNCTION tickwork_jobs_notify()""",
]


def _run_on_postgresql(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            for statement in statements:
                schema_editor.execute(statement, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [("jobs", "0004_worker_totals")]

    operations = [
        migrations.RunPython(
            _run_on_postgresql(ROW_TRIGGER),
            _run_on_postgresql(STATEMENT_TRIGGER),
            elidable=False,
        ),
    ]
