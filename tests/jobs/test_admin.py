"""The jobs admin: find failed jobs, retry them; claim columns cannot be edited."""

from django.urls import reverse

from jobs.models import JobStatus
from projects.models import Project, ProjectStatus
from tests.jobs.factories import make_job, reload

CHANGELIST = "admin:jobs_job_changelist"


def make_failed(tenant, **fields):
    job = make_job(tenant, status=JobStatus.FAILED, attempts=5, **fields)
    Project.objects.filter(pk=job.project_id).update(status=ProjectStatus.FAILED)
    return job


def test_the_list_filters_by_status_and_error_category(admin_client, alice):
    failed = make_failed(alice.tenant, last_error_category="http_5xx")
    pending = make_job(alice.tenant)

    by_status = admin_client.get(reverse(CHANGELIST), {"status__exact": "failed"})
    by_category = admin_client.get(reverse(CHANGELIST), {"last_error_category__exact": "timeout"})

    assert by_status.status_code == 200
    assert str(failed.id) in by_status.text
    assert str(pending.id) not in by_status.text
    assert "5/5" in by_status.text
    assert by_category.status_code == 200
    assert str(failed.id) not in by_category.text


def test_the_claim_columns_are_read_only(admin_client, alice):
    job = make_job(alice.tenant)

    page = admin_client.get(reverse("admin:jobs_job_change", args=[job.pk]))

    assert page.status_code == 200
    assert 'name="claim_token"' not in page.text
    assert 'name="claimed_until' not in page.text


def test_the_retry_action_retries_failed_jobs_and_skips_the_others(admin_client, alice):
    failed = make_failed(alice.tenant, last_error="boom")
    completed = make_job(alice.tenant, status=JobStatus.COMPLETED)

    response = admin_client.post(
        reverse(CHANGELIST),
        {"action": "retry", "_selected_action": [str(failed.pk), str(completed.pk)]},
        follow=True,
    )

    assert response.status_code == 200
    assert "1 job(s) will run again." in response.text
    assert "1 job(s) skipped" in response.text
    stored = reload(failed)
    assert (stored.status, stored.attempts, stored.last_error) == (JobStatus.PENDING, 0, "")
    assert stored.project.status == ProjectStatus.PROVISIONING
    assert reload(completed).status == JobStatus.COMPLETED
