"""Takes over dbqueue's rate-limit table (state only: its rows and its UNLOGGED setting on
PostgreSQL stay), then gives it this app's name."""

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [("dbqueue", "0006_ratewindow_to_dbtools")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="RateWindow",
                    fields=[
                        (
                            "key",
                            models.CharField(max_length=100, primary_key=True, serialize=False),
                        ),
                        ("count", models.IntegerField()),
                        ("expires_us", models.BigIntegerField(db_index=True)),
                    ],
                    options={"db_table": "dbqueue_ratewindow"},
                )
            ],
            database_operations=[],
        ),
        migrations.AlterModelTable(name="ratewindow", table=None),
    ]
