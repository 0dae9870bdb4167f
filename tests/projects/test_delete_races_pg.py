"""On PostgreSQL, a project deleted while its provision job is being written back: the two
take turns (the delete locks the jobs first, in the consumer's order), never deadlock, and
never leave a notification pointing at a deleted project."""

import threading

import pytest
from django.utils import timezone

from delivery.models import Notification
from jobs.consumer import jobs_claim
from jobs.models import Job
from jobs.services import jobs_complete
from projects.models import Project
from projects.provisioning import provision_activate_many
from projects.services import project_delete
from tests.conftest import requires_postgres
from tests.jobs.factories import make_endpoint
from tests.projects.factories import make_project
from tests.support.concurrency import WAIT_SECONDS, run_together, wait_for_lock_waiters

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True)]


def test_a_delete_during_a_completion_waits_for_it_and_then_deletes(alice, settings):
    settings.PROVISIONING_URL = ""
    make_endpoint(alice.tenant)
    project = make_project(alice)
    now = timezone.now()
    [job] = jobs_claim(now=now, limit=1)
    completing = threading.Event()

    def apply(jobs):
        completing.set()  # the job row is locked by the fenced update
        wait_for_lock_waiters(1)  # the delete has started and waits for that lock
        provision_activate_many(jobs, now=now)

    def complete():
        jobs_complete(jobs=[job], now=now, apply=apply)

    def delete():
        assert completing.wait(WAIT_SECONDS)
        project_delete(tenant=alice.tenant, project_id=project.id)

    run_together([complete, delete])  # raises what either raised

    assert not Project.objects.filter(pk=project.pk).exists()
    assert not Job.objects.filter(pk=job.pk).exists()
    # The activation committed first; its notifications stay, without the project.
    announced = Notification.objects.filter(tenant=alice.tenant)
    assert announced.exists()
    assert set(announced.values_list("project_id", flat=True)) == {None}


def test_a_completion_during_a_delete_is_fenced_out(alice, settings):
    settings.PROVISIONING_URL = ""
    project = make_project(alice)
    now = timezone.now()
    [job] = jobs_claim(now=now, limit=1)
    applied: list = []

    project_delete(tenant=alice.tenant, project_id=project.id)
    done = jobs_complete(jobs=[job], now=now, apply=applied.extend)

    assert done == set()
    assert applied == []
