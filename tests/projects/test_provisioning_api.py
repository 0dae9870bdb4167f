"""The provision handler's call to the external provisioning API and its error classes."""

import json
from datetime import timedelta

import pytest
import requests
import responses

from dbqueue.clock import Clock
from jobs.consumer import jobs_drain
from jobs.models import JobStatus
from outbound.categories import ErrorCategory
from projects.models import ProjectStatus
from tests.jobs.factories import NOW, make_job, reload
from tests.support.http_server import Reply, recording_server

API = "https://provisioning.example.com/v1/workspaces"


@pytest.fixture(autouse=True)
def _settings(settings):
    settings.JOB_BACKOFF_SECONDS = (10, 60, 300, 1800)
    settings.PROVISIONING_TIMEOUT_SECONDS = 5


def drain() -> None:
    jobs_drain(clock=Clock(now=NOW), limit=1, max_seconds=60)


def test_the_provisioning_api_receives_the_project_keyed_by_the_job_id(alice, settings):
    job = make_job(alice.tenant, name="Atlas")
    with recording_server(lambda request: Reply(201, body=b"{}")) as server:
        settings.PROVISIONING_URL = f"{server.url}/workspaces"
        drain()
        [request] = server.received()

    assert request.method == "POST"
    assert request.path == "/workspaces"
    assert request.headers["idempotency-key"] == str(job.id)
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.body) == {
        "project_id": str(job.project_id),
        "tenant_id": str(alice.tenant.id),
        "name": "Atlas",
    }
    job = reload(job)
    assert job.status == JobStatus.COMPLETED
    assert job.project.status == ProjectStatus.ACTIVE


def test_a_retried_call_sends_the_same_idempotency_key(alice, settings):
    job = make_job(alice.tenant)
    replies = iter([Reply(503), Reply(200)])
    with recording_server(lambda request: next(replies)) as server:
        settings.PROVISIONING_URL = server.url
        jobs_drain(clock=Clock(now=NOW), limit=1, max_seconds=60)
        jobs_drain(clock=Clock(now=NOW + timedelta(seconds=10)), limit=1, max_seconds=60)
        keys = [r.headers["idempotency-key"] for r in server.received()]

    assert keys == [str(job.id), str(job.id)]
    assert reload(job).status == JobStatus.COMPLETED


@pytest.mark.parametrize(
    ("failure", "category"),
    [
        (requests.exceptions.ReadTimeout(), ErrorCategory.TIMEOUT),
        (requests.exceptions.ConnectionError(), ErrorCategory.CONNECTION),
    ],
)
@responses.activate
def test_transport_failures_are_retried_after_the_backoff(alice, settings, failure, category):
    settings.PROVISIONING_URL = API + "?token=s3cret"
    responses.add(responses.POST, API, body=failure)
    job = make_job(alice.tenant)

    drain()

    job = reload(job)
    assert job.status == JobStatus.PENDING
    assert job.last_error_category == category
    assert job.next_attempt_at == NOW + timedelta(seconds=10)
    assert "s3cret" not in job.last_error
    assert job.project.status == ProjectStatus.PROVISIONING


@pytest.mark.parametrize("status", [500, 502, 503])
@responses.activate
def test_a_5xx_is_retried(alice, settings, status):
    settings.PROVISIONING_URL = API
    responses.add(responses.POST, API, status=status)
    job = make_job(alice.tenant)

    drain()

    job = reload(job)
    assert job.status == JobStatus.PENDING
    assert job.last_error_category == ErrorCategory.HTTP_5XX
    assert job.last_error == f"provisioning API answered HTTP {status}"


@pytest.mark.parametrize("status", [408, 409, 425])
@responses.activate
def test_a_transient_4xx_is_retried(alice, settings, status):
    settings.PROVISIONING_URL = API
    responses.add(responses.POST, API, status=status)
    job = make_job(alice.tenant)

    drain()

    job = reload(job)
    assert job.status == JobStatus.PENDING
    assert job.last_error_category == ErrorCategory.HTTP_4XX


@responses.activate
def test_retry_after_pushes_the_next_attempt_further_than_the_backoff(alice, settings):
    settings.PROVISIONING_URL = API
    responses.add(responses.POST, API, status=429, headers={"Retry-After": "120"})
    job = make_job(alice.tenant)

    drain()

    assert reload(job).next_attempt_at == NOW + timedelta(seconds=120)


@pytest.mark.parametrize(
    ("status", "headers"), [(429, {}), (429, {"Retry-After": "30"}), (503, {"Retry-After": "30"})]
)
@responses.activate
def test_backpressure_defers_the_job_without_using_an_attempt(alice, settings, status, headers):
    settings.PROVISIONING_URL = API
    responses.add(responses.POST, API, status=status, headers=headers)
    job = make_job(alice.tenant)

    summary = jobs_drain(clock=Clock(now=NOW), limit=1, max_seconds=60)

    job = reload(job)
    assert (job.status, job.attempts) == (JobStatus.PENDING, 0)
    assert job.last_error_category == ErrorCategory.RATE_LIMITED
    wait = float(headers.get("Retry-After", 1))
    assert job.next_attempt_at == NOW + timedelta(seconds=wait)
    assert (summary.deferred, summary.backed_off, summary.dead_lettered) == (1, 0, 0)


def test_jobs_complete_after_five_minutes_of_429_with_their_attempts_unchanged(alice, settings):
    job = make_job(alice.tenant)
    replies = iter([Reply(429, headers={"Retry-After": "60"})] * 5 + [Reply(200)])
    with recording_server(lambda request: next(replies)) as server:
        settings.PROVISIONING_URL = server.url
        for minute in range(6):
            jobs_drain(clock=Clock(now=NOW + timedelta(minutes=minute)), limit=1, max_seconds=60)
        calls = len(server.received())

    job = reload(job)
    assert calls == 6
    assert (job.status, job.attempts) == (JobStatus.COMPLETED, 1)
    assert job.project.status == ProjectStatus.ACTIVE


@responses.activate
def test_past_the_deferral_horizon_backpressure_counts_as_a_failure(alice, settings):
    settings.PROVISIONING_URL = API
    settings.BACKPRESSURE_MAX_DEFER_SECONDS = 600
    responses.add(responses.POST, API, status=429, headers={"Retry-After": "30"})
    job = make_job(alice.tenant, max_attempts=1)

    jobs_drain(clock=Clock(now=NOW + timedelta(seconds=600)), limit=1, max_seconds=60)

    job = reload(job)
    assert (job.status, job.attempts) == (JobStatus.DEAD_LETTERED, 1)
    assert job.last_error_category == ErrorCategory.RATE_LIMITED
    assert job.project.status == ProjectStatus.FAILED


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
@responses.activate
def test_any_other_4xx_fails_the_job_at_once(alice, settings, status):
    settings.PROVISIONING_URL = API
    responses.add(responses.POST, API, status=status)
    job = make_job(alice.tenant)

    drain()

    job = reload(job)
    assert job.status == JobStatus.DEAD_LETTERED
    assert job.attempts == 1
    assert job.last_error_category == ErrorCategory.HTTP_4XX
    assert job.project.status == ProjectStatus.FAILED


@responses.activate
def test_a_redirect_is_not_followed_and_fails_the_job(alice, settings):
    settings.PROVISIONING_URL = API
    responses.add(responses.POST, API, status=302, headers={"Location": "https://elsewhere/"})
    job = make_job(alice.tenant)

    drain()

    job = reload(job)
    assert job.status == JobStatus.DEAD_LETTERED
    assert job.last_error_category == ErrorCategory.HTTP_3XX
    assert len(responses.calls) == 1


INTERNAL_HOST = "prov-7f3a.svc.internal"
INTERNAL_URL = f"https://{INTERNAL_HOST}:8443/v1/workspaces"


@pytest.mark.parametrize(
    ("failure", "category", "message"),
    [
        (requests.exceptions.ConnectTimeout(), "timeout", "the provisioning API timed out"),
        (
            requests.exceptions.ConnectionError(f"{INTERNAL_URL}: refused by 10.20.30.40"),
            "connection",
            "the provisioning API could not be reached",
        ),
    ],
)
@responses.activate
def test_a_tenant_reads_the_failure_s_category_never_the_internal_service(
    alice, settings, failure, category, message
):
    settings.PROVISIONING_URL = INTERNAL_URL + "?key=s3cret"
    responses.add(responses.POST, INTERNAL_URL, body=failure)
    job = make_job(alice.tenant)
    drain()

    body = alice.client().get(f"/v1/jobs/{job.id}").json()

    assert (body["last_error_category"], body["last_error"]) == (category, message)
    for internal in (INTERNAL_HOST, ":8443", "/v1/workspaces", "s3cret", "10.20.30.40"):
        assert internal not in json.dumps(body)


def test_a_misconfigured_address_fails_the_job_at_once_as_an_invalid_request(alice, settings):
    # The client refuses it before any connection: the same category a webhook gets.
    settings.PROVISIONING_URL = "https://operator:s3cret@provisioning.example.com/v1"
    job = make_job(alice.tenant)

    drain()

    body = alice.client().get(f"/v1/jobs/{job.id}").json()
    assert reload(job).status == JobStatus.DEAD_LETTERED
    assert (body["last_error_category"], body["last_error"]) == (
        "invalid_request",
        "the provisioning API's address is misconfigured",
    )
