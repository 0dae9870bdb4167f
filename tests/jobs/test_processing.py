"""Outcomes of a claimed job: backoff, dead letter, jobs that crashed their worker, unknown
kinds, errors."""

from datetime import timedelta

import pytest

from dbqueue.backoff import backoff_seconds
from dbqueue.clock import Clock
from jobs.consumer import jobs_claim, jobs_drain
from jobs.models import Job, JobStatus
from jobs.registry import HANDLERS, Handler, JobError
from jobs.services import safe_error_text
from outbound.categories import ErrorCategory
from projects.models import ProjectStatus
from tests.jobs.factories import NOW, make_job, reload

BACKOFF = (10, 60, 300, 1800)


@pytest.fixture(autouse=True)
def _settings(settings):
    settings.JOB_BACKOFF_SECONDS = BACKOFF
    settings.JOB_LEASE_SECONDS = 60
    settings.PROVISIONING_URL = ""


@pytest.fixture
def runs(monkeypatch) -> list[str]:
    """Registers the kinds `flaky` (always a transient failure) and `crashing` (raises an
    unexpected exception); returns the ids of the jobs their handlers ran for."""
    calls: list[str] = []

    def flaky(job):
        calls.append(str(job.id))
        raise JobError("upstream answered HTTP 503", category=ErrorCategory.HTTP_5XX)

    def crashing(job):
        calls.append(str(job.id))
        raise ValueError("could not reach ann@example.com")

    monkeypatch.setitem(HANDLERS, "flaky", Handler(perform=flaky, apply=lambda job, now: None))
    monkeypatch.setitem(HANDLERS, "crashing", Handler(perform=crashing, apply=lambda j, now: None))
    return calls


def drain_at(moment) -> None:
    jobs_drain(clock=Clock(now=moment), limit=100, max_seconds=60)


def test_backoff_steps_repeat_the_last_one():
    assert [backoff_seconds(failures_before=n - 1, steps=BACKOFF) for n in range(1, 7)] == [
        10,
        60,
        300,
        1800,
        1800,
        1800,
    ]


def test_safe_error_text_drops_urls_and_addresses():
    text = (
        "POST https://api.example.com/x?token=abc failed for ann@example.com "
        "(connection to 10.1.2.3:8443 refused)"
    )

    assert safe_error_text(text) == "POST <url> failed for <address> (connection to <ip> refused)"


def test_failures_are_retried_at_the_backoff_until_the_job_is_dead_lettered(alice, runs):
    job = make_job(alice.tenant, kind="flaky", max_attempts=5)
    moment = NOW
    for attempt, delay in enumerate(BACKOFF, start=1):
        drain_at(moment)
        stored = reload(job)
        assert stored.status == JobStatus.PENDING
        assert stored.attempts == attempt
        assert stored.next_attempt_at == moment + timedelta(seconds=delay)
        assert stored.last_error_category == ErrorCategory.HTTP_5XX
        drain_at(moment + timedelta(seconds=delay - 1))  # not due yet: nothing runs
        assert len(runs) == attempt
        moment += timedelta(seconds=delay)

    drain_at(moment)

    stored = reload(job)
    assert stored.status == JobStatus.DEAD_LETTERED
    assert stored.attempts == 5
    assert stored.claimed_until is None
    assert stored.next_attempt_at is None
    assert stored.project.status == ProjectStatus.FAILED
    drain_at(moment + timedelta(days=1))
    assert len(runs) == 5


def test_a_job_that_kills_its_worker_every_time_ends_failed_as_crashed(alice, runs):
    job = make_job(alice.tenant, kind="flaky", max_attempts=3)
    moment = NOW
    for _ in range(3):  # three workers claim it and die without an outcome
        assert len(jobs_claim(now=moment, limit=10)) == 1
        moment += timedelta(seconds=61)

    drain_at(moment)

    stored = reload(job)
    assert stored.status == JobStatus.DEAD_LETTERED
    assert stored.last_error_category == ErrorCategory.CRASHED
    assert stored.attempts == 3
    assert stored.next_attempt_at is None
    assert stored.project.status == ProjectStatus.FAILED
    assert runs == []  # the claim that found it did not run it again
    drain_at(moment + timedelta(days=1))
    assert reload(job).status == JobStatus.DEAD_LETTERED


def test_an_unknown_kind_fails_permanently_at_once(alice):
    job = make_job(alice.tenant, kind="teleport")

    drain_at(NOW)

    stored = reload(job)
    assert stored.status == JobStatus.DEAD_LETTERED
    assert stored.attempts == 1
    assert stored.last_error_category == ErrorCategory.UNKNOWN_KIND
    assert stored.project.status == ProjectStatus.FAILED


def test_an_unexpected_exception_is_retried_as_internal_without_its_message(alice, runs):
    job = make_job(alice.tenant, kind="crashing")

    drain_at(NOW)

    stored = reload(job)
    assert stored.status == JobStatus.PENDING
    assert stored.last_error_category == ErrorCategory.INTERNAL
    assert stored.last_error == "internal error: ValueError"


def test_a_batch_summary_counts_each_outcome(alice, runs):
    make_job(alice.tenant)
    make_job(alice.tenant, kind="flaky")
    make_job(alice.tenant, kind="teleport")

    summary = jobs_drain(clock=Clock(now=NOW), limit=100, max_seconds=60)

    assert (summary.claimed, summary.completed, summary.backed_off, summary.dead_lettered) == (
        3,
        1,
        1,
        1,
    )
    assert summary.line().startswith(
        "event=consume_jobs claimed=3 completed=1 backed_off=1 deferred=0 dead_lettered=1 "
        "fenced_out=0 "
        "duration_s="
    )


def test_a_batch_stops_at_its_limit(alice):
    for _ in range(3):
        make_job(alice.tenant)

    summary = jobs_drain(clock=Clock(now=NOW), limit=2, max_seconds=60)

    assert summary.claimed == 2
    statuses = sorted(Job.objects.values_list("status", flat=True))
    assert statuses == [JobStatus.COMPLETED, JobStatus.COMPLETED, JobStatus.PENDING]


def test_a_completed_job_has_no_next_attempt(alice):
    job = make_job(alice.tenant)

    drain_at(NOW)

    stored = reload(job)
    assert stored.status == JobStatus.COMPLETED
    assert stored.next_attempt_at is None
