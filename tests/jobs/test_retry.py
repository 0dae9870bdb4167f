"""POST /v1/jobs/{id}/retry: owners make a failed job run again like a new one."""

import uuid

import pytest

from dbqueue.clock import Clock
from jobs.consumer import jobs_drain
from jobs.models import Job, JobStatus
from jobs.services import job_retry
from projects.models import Project, ProjectStatus
from tests.jobs.factories import NOW, make_job, reload


@pytest.fixture(autouse=True)
def _settings(settings):
    settings.PROVISIONING_URL = ""


def make_failed_job(tenant) -> Job:
    job = make_job(
        tenant,
        status=JobStatus.DEAD_LETTERED,
        attempts=5,
        claim_token=7,
        last_error_category="http_5xx",
        last_error="provisioning API answered HTTP 503",
        next_attempt_at=None,
    )
    Project.objects.filter(jobs=job).update(status=ProjectStatus.FAILED)
    return job


def retry_url(job_id) -> str:
    return f"/v1/jobs/{job_id}/retry"


def test_the_owner_retries_a_failed_job_which_then_runs_like_a_new_one(alice):
    job = make_failed_job(alice.tenant)

    response = alice.client().post(retry_url(job.id))

    assert response.status_code == 200
    body = response.json()
    assert body["id"] == str(job.id)
    assert body["project_id"] == str(job.project_id)
    assert body["status"] == "pending"
    assert body["attempts"] == 0
    assert body["last_error_category"] is None
    assert body["last_error"] is None
    stored = reload(job)
    assert stored.claimed_until is None
    assert stored.claim_token == 7  # the fence only grows
    assert stored.project.status == ProjectStatus.PROVISIONING

    summary = jobs_drain(clock=Clock(), limit=10, max_seconds=60)

    assert summary.completed == 1
    stored = reload(job)
    assert stored.status == JobStatus.COMPLETED
    assert stored.attempts == 1
    assert stored.project.status == ProjectStatus.ACTIVE


def test_a_retried_job_is_due_at_the_retry_time(alice):
    job = make_failed_job(alice.tenant)

    job_retry(tenant=alice.tenant, job_id=job.id, now=NOW)

    assert reload(job).next_attempt_at == NOW


def test_a_member_may_not_retry(alice, bob):
    job = make_failed_job(alice.tenant)

    response = bob.client().post(retry_url(job.id))

    assert response.status_code == 403
    assert response["Content-Type"] == "application/problem+json"
    assert reload(job).status == JobStatus.DEAD_LETTERED


@pytest.mark.parametrize("status", [JobStatus.PENDING, JobStatus.RUNNING, JobStatus.COMPLETED])
def test_only_a_failed_job_can_be_retried(alice, status):
    job = make_job(alice.tenant, status=status, attempts=2)

    response = alice.client().post(retry_url(job.id))

    assert response.status_code == 409
    assert response["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == 409
    assert status in problem["detail"]
    stored = reload(job)
    assert (stored.status, stored.attempts) == (status, 2)


def test_another_tenants_job_is_not_found(alice, charlie):
    job = make_failed_job(alice.tenant)

    response = charlie.client().post(retry_url(job.id))

    assert response.status_code == 404
    assert response.json()["status"] == 404
    assert reload(job).status == JobStatus.DEAD_LETTERED


def test_a_missing_job_is_not_found(alice):
    response = alice.client().post(retry_url(uuid.uuid4()))

    assert response.status_code == 404


def test_retry_needs_authentication(anonymous, alice):
    job = make_failed_job(alice.tenant)

    response = anonymous.post(retry_url(job.id))

    assert response.status_code == 401
    assert reload(job).status == JobStatus.DEAD_LETTERED
