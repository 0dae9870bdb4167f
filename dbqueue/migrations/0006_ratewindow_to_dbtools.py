"""The rate-limit counters belong to the database tools (dbtools) now: the model leaves this
app's state; its table stays as it is, and dbtools takes it over."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("dbqueue", "0005_ratewindow_unlogged")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="RateWindow")],
            database_operations=[],
        )
    ]
