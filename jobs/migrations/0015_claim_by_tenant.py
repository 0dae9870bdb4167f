"""The index a claim walks on PostgreSQL from one tenant with claimable jobs to the next
(dbqueue.ranking, ClaimSpec.groups), Django tasks (no tenant) first, taking each one's first
ready jobs in claim order. SQLite's claim ranks the ready jobs it finds through job_ready_idx,
and given this index its planner would scan every claimable job instead: the index is
PostgreSQL's only."""

from django.db import migrations, models

CONDITION = "status IN ('pending', 'running')"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            "CREATE INDEX job_tenant_ready_idx ON jobs_job "
            f"(tenant_id, priority DESC, next_attempt_at, id) WHERE {CONDITION}"
        )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS job_tenant_ready_idx")


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0014_tasks_on_the_outbox"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddIndex(
                    model_name="job",
                    index=models.Index(
                        condition=models.Q(("status__in", ["pending", "running"])),
                        fields=["tenant", "-priority", "next_attempt_at", "id"],
                        name="job_tenant_ready_idx",
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(create, drop)],
        ),
    ]
