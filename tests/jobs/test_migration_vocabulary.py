"""Migration 0010: a job stored with the old name of an unusable request reads as the one
vocabulary's `invalid_request`; other categories are left as they were."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("jobs", "0009_rate_limited_category")]
AFTER = [("jobs", "0010_vocabulary")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def _stored(apps, **categories):
    tenant = apps.get_model("tenancy", "Tenant").objects.create(name="T")
    project = apps.get_model("projects", "Project").objects.create(tenant=tenant, name="P")
    jobs = apps.get_model("jobs", "Job").objects
    return {
        name: jobs.create(
            tenant=tenant,
            project=project,
            kind="provision",
            max_attempts=5,
            last_error_category=category,
        ).pk
        for name, category in categories.items()
    }


def _categories(apps, pks):
    jobs = apps.get_model("jobs", "Job").objects
    return {name: jobs.get(pk=pk).last_error_category for name, pk in pks.items()}


@pytest.mark.django_db(transaction=True)
def test_invalid_url_is_rewritten_to_invalid_request_and_back():
    pks = _stored(_migrate(BEFORE), misconfigured="invalid_url", slow="timeout", clean="")

    assert _categories(_migrate(AFTER), pks) == {
        "misconfigured": "invalid_request",
        "slow": "timeout",
        "clean": "",
    }
    assert _categories(_migrate(BEFORE), pks)["misconfigured"] == "invalid_url"

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
