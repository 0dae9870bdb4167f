"""A claimant whose job was reclaimed after its lease ran out changes nothing."""

import logging
from datetime import timedelta

import pytest

from dbqueue.clock import Clock
from delivery.models import Notification
from jobs.consumer import jobs_claim, jobs_drain
from jobs.models import JobStatus
from jobs.processing import jobs_process
from jobs.registry import HANDLERS, Handler, JobError
from jobs.services import Outcome
from outbound.categories import ErrorCategory
from projects.models import ProjectStatus
from tests.jobs.factories import NOW, make_job, reload

AFTER_LEASE = NOW + timedelta(seconds=61)


def run_late(stale) -> list[Outcome]:
    """The stale claimant runs its batch on the consumer's path, after its lease ran out."""
    return jobs_process([stale], clock=Clock(now=AFTER_LEASE), should_stop=lambda: False)


@pytest.fixture(autouse=True)
def _settings(settings):
    settings.JOB_LEASE_SECONDS = 60
    settings.PROVISIONING_URL = ""


def test_a_stale_success_is_dropped_logged_and_applies_nothing(alice, caplog):
    job = make_job(alice.tenant, invite=["ann@example.com"])
    [stale] = jobs_claim(now=NOW, limit=1)
    jobs_claim(now=AFTER_LEASE, limit=1)  # another consumer reclaims the orphan

    with caplog.at_level(logging.WARNING, logger="jobs.consumer"):
        outcomes = run_late(stale)

    assert outcomes == [Outcome.FENCED_OUT]
    assert f"fenced out on complete for job {job.id}, claim_token=1" in caplog.text
    stored = reload(job)
    assert stored.status == JobStatus.RUNNING
    assert stored.claim_token == 2
    assert stored.claimed_until is not None
    assert stored.project.status == ProjectStatus.PROVISIONING
    assert not Notification.objects.exists()


def test_a_stale_failure_is_dropped(alice, monkeypatch, caplog):
    def failing(job):
        raise JobError("HTTP 500", category=ErrorCategory.HTTP_5XX)

    monkeypatch.setitem(HANDLERS, "failing", Handler(perform=failing, apply=lambda j, now: None))
    job = make_job(alice.tenant, kind="failing", max_attempts=1)
    [stale] = jobs_claim(now=NOW, limit=1)
    jobs_claim(now=AFTER_LEASE, limit=1)

    with caplog.at_level(logging.WARNING, logger="jobs.consumer"):
        outcomes = run_late(stale)

    assert outcomes == [Outcome.FENCED_OUT]
    assert f"fenced out on dead_letter for job {job.id}, claim_token=1" in caplog.text
    stored = reload(job)
    assert stored.status == JobStatus.RUNNING
    assert stored.last_error_category == ""
    assert stored.project.status == ProjectStatus.PROVISIONING


def test_a_completed_job_ignores_a_late_outcome_of_an_earlier_claim(alice):
    job = make_job(alice.tenant)
    [stale] = jobs_claim(now=NOW, limit=1)
    jobs_drain(clock=Clock(now=AFTER_LEASE), limit=10, max_seconds=60)  # reclaimed, completed

    assert run_late(stale) == [Outcome.FENCED_OUT]
    stored = reload(job)
    assert stored.status == JobStatus.COMPLETED
    assert stored.completed_at == AFTER_LEASE


def test_a_batch_counts_the_outcomes_it_was_fenced_out_of(alice, monkeypatch):
    def slow(job):
        # The work outlives the lease and another consumer takes the job over meanwhile.
        jobs_claim(now=AFTER_LEASE, limit=1)

    monkeypatch.setitem(HANDLERS, "slow", Handler(perform=slow, apply=lambda j, now: None))
    make_job(alice.tenant, kind="slow")

    summary = jobs_drain(clock=Clock(now=NOW), limit=1, max_seconds=60)

    assert (summary.claimed, summary.completed, summary.fenced_out) == (1, 0, 1)
    assert "fenced_out=1" in summary.line()
