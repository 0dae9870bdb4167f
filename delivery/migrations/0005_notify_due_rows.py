"""PostgreSQL only: wake `run_tick --loop` when a row becomes due now.

Two row triggers run pg_notify('tickwork_tick', '') for a claimable row due now: one after
an INSERT (a one-shot due now, a message's deliveries), one after an UPDATE that moves a
row's `state` or `next_fire_at` (a retry, a resend brought forward, a recovered chunk).
PostgreSQL folds the identical notifications of one transaction into one, delivered at
commit, so a bulk publish of 10,000 rows wakes a listening tick once.

The UPDATE trigger fires only when the row *became* due, never on a write that leaves a due
row due: a tick that gives back a row it found no endpoint slot for must not wake every tick
to claim it again. `clock_timestamp()`, not `now()`: a row inserted late in a long
transaction is due by the wall clock, not by the transaction's start.
SQLite has no LISTEN/NOTIFY: its ticks poll at --interval.
"""

from django.db import migrations

CHANNEL = "tickwork_tick"
TABLE = "notifications_notification"
DUE_NOW = "NEW.state IN ('scheduled', 'backing_off') AND NEW.next_fire_at <= clock_timestamp()"

CREATE = [
    f"""CREATE OR REPLACE FUNCTION tickwork_tick_notify() RETURNS trigger AS $$
    BEGIN
        PERFORM pg_notify('{CHANNEL}', '');
        RETURN NULL;
    END;
    $$ LANGUAGE plpgsql""",
    f"""CREATE TRIGGER tickwork_tick_notify_insert
    AFTER INSERT ON {TABLE}
    FOR EACH ROW WHEN ({DUE_NOW}) EXECUTE FUNCTION tickwork_tick_notify()""",
    f"""CREATE TRIGGER tickwork_tick_notify_update
    AFTER UPDATE OF state, next_fire_at ON {TABLE}
    FOR EACH ROW WHEN (
        {DUE_NOW}
        AND (
            OLD.state NOT IN ('scheduled', 'backing_off')
            OR OLD.next_fire_at IS NULL
            OR OLD.next_fire_at > clock_timestamp()
        )
    ) EXECUTE FUNCTION tickwork_tick_notify()""",
]

DROP = [
    f"DROP TRIGGER IF EXISTS tickwork_tick_notify_insert ON {TABLE}",
    f"DROP TRIGGER IF EXISTS tickwork_tick_notify_update ON {TABLE}",
    "DROP FUNCTION IF EXISTS tickwork_tick_notify()",
]


def _run_on_postgresql(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            for statement in statements:
                schema_editor.execute(statement, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [("delivery", "0004_applications")]

    operations = [
        migrations.RunPython(_run_on_postgresql(CREATE), _run_on_postgresql(DROP), elidable=False),
    ]
