"""The jobs' transition table: the moves the consumer and the retry may write, and nothing
else is written."""

import pytest

from jobs.services import JobNotRetryable, job_complete, job_fail, job_retry
from jobs.states import (
    CLAIMABLE,
    TRANSITIONS,
    IllegalTransition,
    JobStatus,
    Move,
    after,
    allows,
    sources,
)
from outbound.categories import ErrorCategory
from tests.jobs.factories import NOW, make_job, reload

S = JobStatus


def test_the_table_names_every_move_and_only_stored_statuses():
    assert set(TRANSITIONS) == set(Move)
    for starts, target in TRANSITIONS.values():
        assert starts <= {None, *S}
        assert target in S


@pytest.mark.parametrize(
    ("status", "move", "target"),
    [
        (None, Move.ENQUEUE, S.PENDING),
        (S.PENDING, Move.CLAIM, S.RUNNING),
        (S.RUNNING, Move.CLAIM, S.RUNNING),
        (S.RUNNING, Move.COMPLETE, S.COMPLETED),
        (S.RUNNING, Move.BACK_OFF, S.PENDING),
        (S.RUNNING, Move.DEFER, S.PENDING),
        (S.RUNNING, Move.RELEASE, S.PENDING),
        (S.RUNNING, Move.DEAD_LETTER, S.DEAD_LETTERED),
        (S.DEAD_LETTERED, Move.RETRY, S.PENDING),
    ],
)
def test_the_allowed_moves(status, move, target):
    assert after(status, move) == target


@pytest.mark.parametrize(
    ("status", "move"),
    [
        (S.COMPLETED, Move.CLAIM),
        (S.DEAD_LETTERED, Move.CLAIM),
        (S.PENDING, Move.COMPLETE),
        (S.COMPLETED, Move.DEAD_LETTER),
        (S.DEAD_LETTERED, Move.BACK_OFF),
        (S.PENDING, Move.RETRY),
        (S.RUNNING, Move.RETRY),
        (S.COMPLETED, Move.RETRY),
        (S.PENDING, Move.ENQUEUE),
    ],
)
def test_an_illegal_move_is_refused(status, move):
    assert not allows(status, move)
    with pytest.raises(IllegalTransition):
        after(status, move)


def test_the_ready_query_holds_the_claimable_statuses():
    assert sorted(CLAIMABLE) == sources(Move.CLAIM)


@pytest.mark.parametrize(
    "write",
    [
        lambda job: job_complete(job=job, now=NOW),
        lambda job: job_fail(job=job, now=NOW, category=ErrorCategory.HTTP_5XX, error="503"),
    ],
)
def test_a_consumer_write_from_a_status_that_allows_it_not_is_never_written(alice, write):
    job = make_job(alice.tenant, status=S.COMPLETED, claim_token=3)

    with pytest.raises(IllegalTransition):
        write(job)

    stored = reload(job)
    assert (stored.status, stored.attempt_history) == (S.COMPLETED, [])


@pytest.mark.parametrize("status", [S.PENDING, S.RUNNING, S.COMPLETED])
def test_the_retry_writes_only_from_a_dead_letter(alice, status):
    job = make_job(alice.tenant, status=status)

    with pytest.raises(JobNotRetryable):
        job_retry(tenant=alice.tenant, job_id=job.pk, now=NOW)

    assert reload(job).status == status
