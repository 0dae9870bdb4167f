"""Migration 0011: stored job statuses are rewritten to their new names and back, and the
ready index and the status check follow."""

import pytest
from django.db import IntegrityError, connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("jobs", "0010_vocabulary")]
AFTER = [("jobs", "0011_status_names")]
OLD = {"new": "pending", "claimed": "enqueued", "done": "completed", "dead": "failed"}
NEW = {"new": "pending", "claimed": "running", "done": "completed", "dead": "dead_lettered"}


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def _statuses(apps, pks):
    jobs = apps.get_model("jobs", "Job").objects
    return {name: jobs.get(pk=pk).status for name, pk in pks.items()}


@pytest.mark.django_db(transaction=True)
def test_stored_statuses_are_rewritten_both_ways():
    apps = _migrate(BEFORE)
    tenant = apps.get_model("tenancy", "Tenant").objects.create(name="T")
    project = apps.get_model("projects", "Project").objects.create(tenant=tenant, name="P")
    jobs = apps.get_model("jobs", "Job").objects
    pks = {
        name: jobs.create(
            tenant=tenant, project=project, kind="provision", max_attempts=5, status=status
        ).pk
        for name, status in OLD.items()
    }

    apps = _migrate(AFTER)
    assert _statuses(apps, pks) == NEW
    # The check admits the new names only.
    with pytest.raises(IntegrityError), connection.cursor() as cursor:
        cursor.execute("UPDATE jobs_job SET status = 'failed'")

    assert _statuses(_migrate(BEFORE), pks) == OLD

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_worker_outcome_counters_are_renamed_both_ways():
    before, after = [("dbqueue", "0006_ratewindow_to_dbtools")], [("dbqueue", "0007_outcome_names")]
    apps = _migrate(before)
    totals = apps.get_model("dbqueue", "WorkerTotal").objects
    for worker, name in [
        ("run_tick", "failed"),
        ("run_tick", "dead_lettered"),
        ("consume_jobs", "retried"),
        ("consume_jobs", "failed"),
    ]:
        totals.create(worker=worker, name=name, total=len(worker) + len(name))

    def stored(apps):
        rows = apps.get_model("dbqueue", "WorkerTotal").objects.all()
        return {(row.worker, row.name): row.total for row in rows}

    assert stored(_migrate(after)) == {
        ("run_tick", "backed_off"): 14,
        ("run_tick", "dead_lettered"): 21,
        ("consume_jobs", "backed_off"): 19,
        ("consume_jobs", "dead_lettered"): 18,
    }
    assert stored(_migrate(before)) == {
        ("run_tick", "failed"): 14,
        ("run_tick", "dead_lettered"): 21,
        ("consume_jobs", "retried"): 19,
        ("consume_jobs", "failed"): 18,
    }

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
