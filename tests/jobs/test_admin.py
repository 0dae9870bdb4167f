"""The jobs admin: find failed jobs, retry them; claim columns cannot be edited."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse

from jobs.models import JobStatus
from projects.models import Project, ProjectStatus
from tests.jobs.factories import make_job, reload

CHANGELIST = "admin:jobs_job_changelist"


def make_failed(tenant, **fields):
    job = make_job(tenant, status=JobStatus.DEAD_LETTERED, attempts=5, **fields)
    Project.objects.filter(pk=job.project_id).update(status=ProjectStatus.FAILED)
    return job


def test_the_list_filters_by_status_and_error_category(admin_client, alice):
    failed = make_failed(alice.tenant, last_error_category="http_5xx")
    pending = make_job(alice.tenant)

    by_status = admin_client.get(reverse(CHANGELIST), {"status__exact": "dead_lettered"})
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


def test_a_job_is_never_edited_by_hand(admin_client, alice):
    job = make_failed(alice.tenant, payload={"invite": ["carol@example.com"]})
    change_url = reverse("admin:jobs_job_change", args=[job.pk])

    page = admin_client.get(change_url)
    post = admin_client.post(change_url, {"status": "completed", "attempts": "0"})

    assert page.status_code == 200
    assert 'name="status"' not in page.text and 'name="payload"' not in page.text
    assert "&quot;carol@example.com&quot;" in page.text
    assert post.status_code == 403
    assert (reload(job).status, reload(job).attempts) == (JobStatus.DEAD_LETTERED, 5)


def test_the_retry_button_retries_a_failed_job(admin_client, alice):
    job = make_failed(alice.tenant)
    button = reverse("admin:jobs_job_state_button", args=[job.pk, "retry"])

    page = admin_client.get(reverse("admin:jobs_job_change", args=[job.pk]))
    response = admin_client.post(button, follow=True)

    assert f'action="{button}"' in page.text
    assert "The job will run again." in response.text
    assert reload(job).status == JobStatus.PENDING


def test_no_retry_button_for_a_job_that_is_not_failed(admin_client, alice):
    job = make_job(alice.tenant)
    button = reverse("admin:jobs_job_state_button", args=[job.pk, "retry"])

    page = admin_client.get(reverse("admin:jobs_job_change", args=[job.pk]))

    assert button not in page.text
    assert admin_client.post(button).status_code == 404
    assert reload(job).status == JobStatus.PENDING


def test_job_rows_link_to_their_project(admin_client, alice):
    job = make_job(alice.tenant, name="Website relaunch")

    listing = admin_client.get(reverse(CHANGELIST))

    project_url = reverse("admin:projects_project_change", args=[job.project_id])
    assert f'<a href="{project_url}">Website relaunch</a>' in listing.text
    assert "Tenant A" in listing.text


def test_view_only_staff_cannot_retry(client, alice):
    viewer = get_user_model().objects.create_user("viewer", "viewer@example.com", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_job"))
    client.force_login(viewer)
    job = make_failed(alice.tenant)

    page = client.get(reverse("admin:jobs_job_change", args=[job.pk]))
    pressed = client.post(reverse("admin:jobs_job_state_button", args=[job.pk, "retry"]))

    assert page.status_code == 200
    assert "state/retry" not in page.text
    assert pressed.status_code == 403
    assert reload(job).status == JobStatus.DEAD_LETTERED
