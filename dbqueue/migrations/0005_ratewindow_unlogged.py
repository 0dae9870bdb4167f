"""PostgreSQL only: the rate-limit counters live in an UNLOGGED table.

Every API request counts itself with one upsert, so every request was a write transaction
whose commit waited for the write-ahead log to reach the disk: half the database's CPU of a
small read, and most of its wait. A counter needs no durability: PostgreSQL empties an
unlogged table after a crash (every window starts again, as after a period ends) and
does not stream it to replicas, which never count (dbtools.ratelimit reads and writes the
counters on the primary only). Counting stays exact: the same row and its lock.
"""

from django.db import migrations

TABLE = "dbqueue_ratewindow"


def _set(persistence):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(f"ALTER TABLE {TABLE} SET {persistence}", params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [("dbqueue", "0004_concurrency_slots")]

    operations = [
        migrations.RunPython(_set("UNLOGGED"), _set("LOGGED"), elidable=False),
    ]
