"""Each attempt of a job that wrote an outcome is kept on the job (the newest
HISTORY_LENGTH, oldest first) and read at GET /v1/jobs/{id} as `attempt_history`."""

from datetime import timedelta

import pytest

from dbqueue.clock import Clock
from jobs.consumer import jobs_drain
from jobs.models import HISTORY_LENGTH
from jobs.registry import HANDLERS, Handler, JobError
from jobs.states import JobStatus
from outbound.categories import ErrorCategory
from tests.jobs.factories import NOW, make_job, reload


@pytest.fixture(autouse=True)
def _settings(settings):
    settings.JOB_BACKOFF_SECONDS = (10, 60)
    settings.JOB_LEASE_SECONDS = 60
    settings.PROVISIONING_URL = ""


@pytest.fixture
def twice(monkeypatch):
    """The kind `twice`: its first two attempts fail with a 503 (and a URL in the error, which
    must not be kept), the third succeeds."""
    performed: list[int] = []

    def perform(job):
        performed.append(job.attempts)
        if len(performed) <= 2:
            raise JobError(
                "POST https://api.example.com/x?token=abc answered HTTP 503",
                category=ErrorCategory.HTTP_5XX,
            )

    monkeypatch.setitem(HANDLERS, "twice", Handler(perform=perform, apply=lambda job, now: None))
    return performed


def test_a_job_that_fails_twice_then_succeeds_shows_three_attempts(alice, twice):
    job = make_job(alice.tenant, kind="twice")
    moments = [NOW, NOW + timedelta(seconds=11), NOW + timedelta(seconds=72)]
    for moment in moments:
        jobs_drain(clock=Clock(now=moment), limit=10, max_seconds=60)

    response = alice.client().get(f"/v1/jobs/{job.id}")

    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["attempts"]) == ("completed", 3)
    failure = {
        "outcome": "backed_off",
        "error_category": "http_5xx",
        "error": "POST <url> answered HTTP 503",
    }
    success = {"outcome": "completed", "error_category": None, "error": None}
    assert body["attempt_history"] == [
        {"at": moment.isoformat().replace("+00:00", "Z"), **outcome}
        for moment, outcome in zip(moments, [failure, failure, success], strict=True)
    ]


def test_a_dead_letter_and_a_deferral_are_attempts_too(alice, monkeypatch):
    def busy(job):
        raise JobError(
            "HTTP 429", category=ErrorCategory.RATE_LIMITED, retry_after=30, backpressure=True
        )

    monkeypatch.setitem(HANDLERS, "busy", Handler(perform=busy, apply=lambda job, now: None))
    deferred = make_job(alice.tenant, kind="busy")
    unknown = make_job(alice.tenant, kind="no-such-kind")

    jobs_drain(clock=Clock(now=NOW), limit=10, max_seconds=60)

    assert [(a["outcome"], a["error_category"]) for a in reload(deferred).attempt_history] == [
        ("deferred", "rate_limited")
    ]
    assert reload(unknown).status == JobStatus.DEAD_LETTERED
    assert [(a["outcome"], a["error_category"]) for a in reload(unknown).attempt_history] == [
        ("dead_lettered", "unknown_kind")
    ]


def test_the_history_keeps_the_newest_attempts_only(alice, twice):
    old = [
        {"at": NOW.isoformat(), "outcome": "deferred", "error_category": None, "error": str(n)}
        for n in range(HISTORY_LENGTH)
    ]
    job = make_job(alice.tenant, kind="twice", attempt_history=old)

    jobs_drain(clock=Clock(now=NOW), limit=10, max_seconds=60)

    history = reload(job).attempt_history
    assert len(history) == HISTORY_LENGTH
    assert history[0]["error"] == "1"
    assert history[-1]["outcome"] == "backed_off"


def test_a_retry_keeps_the_history(alice, twice):
    job = make_job(alice.tenant, kind="twice", max_attempts=1)
    jobs_drain(clock=Clock(now=NOW), limit=10, max_seconds=60)
    assert reload(job).status == JobStatus.DEAD_LETTERED

    retried = alice.client().post(f"/v1/jobs/{job.id}/retry")

    assert retried.status_code == 200
    stored = reload(job)
    assert (stored.status, stored.attempts) == (JobStatus.PENDING, 0)
    assert [a["outcome"] for a in stored.attempt_history] == ["dead_lettered"]


def test_the_list_leaves_the_history_out(alice):
    make_job(alice.tenant)

    [listed] = alice.client().get("/v1/jobs").json()["results"]

    assert "attempt_history" not in listed
