"""Batch claims: as many jobs as the lease covers, successes written back together, the
jobs not started given back, a later attempt run alone, one bad job failing only itself."""

from datetime import timedelta

import pytest

from dbqueue.clock import Clock
from delivery.models import Notification
from jobs.consumer import claim_size, jobs_claim, jobs_drain
from jobs.models import Job, JobStatus
from jobs.processing import jobs_process
from jobs.registry import HANDLERS, Handler
from jobs.services import Outcome
from outbound.categories import ErrorCategory
from projects.models import ProjectStatus
from tests.jobs.factories import NOW, make_endpoint, make_job, reload


@pytest.fixture(autouse=True)
def _settings(settings):
    settings.JOB_LEASE_SECONDS = 60
    settings.PROVISIONING_URL = ""
    settings.PROVISIONING_TIMEOUT_SECONDS = 10


def test_a_claim_takes_as_many_jobs_as_the_lease_covers(settings, monkeypatch):
    # Local provisioning: 1 s each, 60 fit in the lease.
    assert claim_size() == 60
    # An API with a 10 s deadline: 11 s each, 5 fit.
    settings.PROVISIONING_URL = "https://provisioning.example.com/v1"
    assert claim_size() == 5
    # A job longer than the lease is still claimed, alone.
    settings.PROVISIONING_TIMEOUT_SECONDS = 120
    assert claim_size() == 1
    # A handler that does not state its worst case: one at a time.
    settings.PROVISIONING_URL = ""
    monkeypatch.setitem(HANDLERS, "vague", Handler(perform=print, apply=print))
    assert claim_size() == 1


def test_a_batch_of_provision_jobs_costs_the_same_statements_as_one(
    alice, django_assert_num_queries
):
    make_endpoint(alice.tenant)
    jobs = [make_job(alice.tenant, user=alice.user) for _ in range(5)]

    # claim, savepoint, fenced update, project update, project read, the event ids' earlier
    # messages, endpoints, the messages, the messages that landed, the deliveries,
    # release, the empty claim that ends the batch, the totals upsert
    with django_assert_num_queries(13):
        summary = jobs_drain(clock=Clock(now=NOW), limit=100, max_seconds=60)

    assert (summary.claimed, summary.completed) == (5, 5)
    for job in jobs:
        stored = reload(job)
        assert stored.status == JobStatus.COMPLETED
        assert stored.project.status == ProjectStatus.ACTIVE
    # One event per job; no email: without an invite list the creator is not "invited".
    assert Notification.objects.count() == 5
    assert not Notification.objects.filter(channels=["email"]).exists()


def test_stopping_mid_batch_gives_back_the_jobs_not_started_with_their_attempt(alice):
    for _ in range(3):
        make_job(alice.tenant)
    claimed = jobs_claim(now=NOW, limit=3)
    assert {job.attempts for job in claimed} == {1}

    # Asked to stop while the first job runs: it finishes, the others go back.
    outcomes = jobs_process(claimed, clock=Clock(now=NOW), should_stop=lambda: True)

    assert outcomes == [Outcome.COMPLETED]
    rest = Job.objects.exclude(pk=claimed[0].pk)
    assert [(job.status, job.attempts, job.claimed_until) for job in rest] == [
        (JobStatus.PENDING, 0, None)
    ] * 2
    assert reload(claimed[0]).status == JobStatus.COMPLETED


def test_a_job_the_shared_lease_no_longer_covers_is_given_back(alice):
    for _ in range(2):
        make_job(alice.tenant)
    claimed = jobs_claim(now=NOW, limit=2)
    # The first job took 59.5 s: the second's 1 s worst case no longer fits.
    late = Clock(now=NOW + timedelta(seconds=59.5))

    outcomes = jobs_process(claimed, clock=late, should_stop=lambda: False)

    assert outcomes == [Outcome.COMPLETED]
    second = Job.objects.get(pk=claimed[1].pk)
    assert (second.status, second.attempts, second.next_attempt_at) == (
        JobStatus.PENDING,
        0,
        late.now(),
    )


def test_a_job_on_a_later_attempt_runs_alone_and_the_others_keep_their_attempts(alice):
    # An orphan: its worker died; it may be what killed it.
    orphan = make_job(
        alice.tenant,
        status=JobStatus.RUNNING,
        attempts=1,
        claimed_until=NOW - timedelta(seconds=1),
        next_attempt_at=NOW - timedelta(seconds=1),
    )
    fresh = [make_job(alice.tenant) for _ in range(3)]
    seen: list[list[str]] = []
    original = jobs_process

    def record(jobs, **kwargs):
        seen.append([str(job.pk) for job in jobs])
        return original(jobs, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("jobs.consumer.jobs_process", record)
        summary = jobs_drain(clock=Clock(now=NOW), limit=100, max_seconds=60)

    assert seen[0] == [str(orphan.pk)]
    assert all(len(batch) == 1 for batch in seen)
    assert summary.completed == 4
    assert reload(orphan).attempts == 2
    assert [reload(job).attempts for job in fresh] == [1, 1, 1]


def test_one_job_whose_local_writes_fail_fails_alone(alice):
    good = [make_job(alice.tenant) for _ in range(2)]
    bad = make_job(alice.tenant, invite=["not an address"])

    summary = jobs_drain(clock=Clock(now=NOW), limit=100, max_seconds=60)

    assert (summary.claimed, summary.completed, summary.backed_off) == (3, 2, 1)
    assert {reload(job).status for job in good} == {JobStatus.COMPLETED}
    stored = reload(bad)
    assert (stored.status, stored.last_error_category) == (
        JobStatus.PENDING,
        ErrorCategory.INTERNAL,
    )
    assert stored.project.status == ProjectStatus.PROVISIONING
