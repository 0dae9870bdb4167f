"""Django tasks where support staff and operators look: the jobs admin lists and retries
them, queue_status and /metrics count them with the jobs."""

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from dbqueue.clock import Clock
from jobs.consumer import jobs_drain
from jobs.models import TASK_KIND, Job, JobStatus
from tests.jobs import task_functions as tasks

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:jobs_job_changelist"


@pytest.fixture(autouse=True)
def _settings(settings):
    settings.PROVISIONING_URL = ""
    settings.JOB_MAX_ATTEMPTS = 1


def test_the_admin_lists_tasks_and_filters_them_by_kind_and_queue(admin_client):
    result = tasks.add.enqueue(1, 2)

    by_kind = admin_client.get(reverse(CHANGELIST), {"kind__exact": TASK_KIND})
    by_queue = admin_client.get(reverse(CHANGELIST), {"queue_name__exact": "other"})

    assert by_kind.status_code == 200
    assert result.id in by_kind.text
    assert result.id not in by_queue.text


def test_the_admin_shows_a_tasks_path_and_return_value(admin_client):
    result = tasks.add.enqueue(40, 2)
    jobs_drain(clock=Clock(now=timezone.now()), limit=10, max_seconds=60)

    page = admin_client.get(reverse("admin:jobs_job_change", args=[result.id]))

    assert page.status_code == 200
    assert "tests.jobs.task_functions.add" in page.text
    assert "42" in page.text


def test_the_admin_retries_a_dead_lettered_task(admin_client):
    result = tasks.fail.enqueue("admin-retry")
    jobs_drain(clock=Clock(now=timezone.now()), limit=10, max_seconds=60)
    assert Job.objects.get(pk=result.id).status == JobStatus.DEAD_LETTERED

    response = admin_client.post(
        reverse(CHANGELIST), {"action": "retry", "_selected_action": [result.id]}, follow=True
    )

    assert "1 job(s) will run again." in response.text
    assert Job.objects.get(pk=result.id).status == JobStatus.PENDING


def test_queue_status_counts_tasks_with_the_jobs():
    tasks.noop.enqueue()
    tasks.noop.using(run_after=timezone.now() + timedelta(hours=1)).enqueue()
    out = io.StringIO()

    call_command("queue_status", "--json", stdout=out)

    assert json.loads(out.getvalue())["jobs"]["pending"] == 2


def test_metrics_count_tasks_with_the_jobs(client, settings):
    settings.METRICS_ENABLED = True
    settings.METRICS_TOKEN = ""
    tasks.noop.enqueue()

    response = client.get("/metrics")

    assert response.status_code == 200
    assert 'tickwork_jobs{status="pending"} 1.0' in response.content.decode()
