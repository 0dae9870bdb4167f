"""The lease predicates: the database's filters and the test of a row already read agree,
and every row is either free or held, never both, at every instant around its lease."""

from datetime import timedelta

import pytest

from dbqueue.leases import is_lease_running, lease_free, lease_running
from jobs.models import Job
from tests.jobs.factories import NOW, make_job

LEASES = {
    "never claimed": None,
    "ended": NOW - timedelta(microseconds=1),
    "last instant": NOW,
    "running": NOW + timedelta(seconds=30),
}


@pytest.fixture
def jobs(alice) -> dict[str, Job]:
    return {
        name: make_job(alice.tenant, name=name, claimed_until=until)
        for name, until in LEASES.items()
    }


def _names(jobs, rows) -> set[str]:
    ids = set(rows.values_list("pk", flat=True))
    return {name for name, job in jobs.items() if job.pk in ids}


def test_free_and_running_partition_the_rows_as_the_value_test_says(jobs):
    free = _names(jobs, Job.objects.filter(lease_free(now=NOW)))
    running = _names(jobs, Job.objects.filter(lease_running(now=NOW)))

    assert free == {"never claimed", "ended"}
    assert running == {"last instant", "running"}
    assert running == {n for n, until in LEASES.items() if is_lease_running(until, now=NOW)}
