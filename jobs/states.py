"""The life of a job: the statuses it is stored in and the only moves between them.

A job's `status` is written by the same statement that moves the row: the consumer's fenced
write-backs ask `after()` for the status a move leads to from the claimed job's status, and
the support retry updates only rows in a status the move may start from (`sources()`), so a
move the table below does not allow is refused (IllegalTransition) or matches no row; it is
never written. Unlike a notification, a job moves on its claim: the claim is what makes it
`running`.

- pending: waiting to run: new, released, deferred, or backing off after a failed attempt
  until `next_attempt_at`.
- running: claimed by a consumer, its lease running until `claimed_until`; a job whose
  lease ran out is claimed again.
- completed: done; never runs again.
- dead_lettered: given up (attempts used up, a permanent error, an unknown kind, a job that
  crashed its worker on every attempt); waits for a support retry.
"""

from collections.abc import Mapping
from enum import StrEnum

from django.db import models


class JobStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running (claimed, lease running)"
    COMPLETED = "completed", "Completed"
    DEAD_LETTERED = "dead_lettered", "Dead-lettered"


# The spellings the statuses had before 0011, accepted by `?status=` for one release.
FORMER_NAMES: Mapping[str, JobStatus] = {
    "enqueued": JobStatus.RUNNING,
    "failed": JobStatus.DEAD_LETTERED,
}


class Move(StrEnum):
    """What happens to a job. The consumer's moves start from a claimed (running) job; a
    claim starts from a pending job or from a running one whose lease ran out."""

    ENQUEUE = "enqueue"
    CLAIM = "claim"
    COMPLETE = "complete"
    # A failed attempt: pending again after the backoff.
    BACK_OFF = "back_off"
    # The provider said "later": pending again, the attempt given back.
    DEFER = "defer"
    # Claimed but never started: pending again, the attempt given back.
    RELEASE = "release"
    DEAD_LETTER = "dead_letter"
    RETRY = "retry"


# The statuses the ready query (and job_ready_idx) hold: every claimed job is in one of them.
CLAIMABLE = (JobStatus.PENDING, JobStatus.RUNNING)
_RUNNING = frozenset({JobStatus.RUNNING})

# move -> (the statuses it may start from, the status it leads to); None stands for "no row
# yet" among the sources.
TRANSITIONS: Mapping[Move, tuple[frozenset, JobStatus]] = {
    Move.ENQUEUE: (frozenset({None}), JobStatus.PENDING),
    Move.CLAIM: (frozenset(CLAIMABLE), JobStatus.RUNNING),
    Move.COMPLETE: (_RUNNING, JobStatus.COMPLETED),
    Move.BACK_OFF: (_RUNNING, JobStatus.PENDING),
    Move.DEFER: (_RUNNING, JobStatus.PENDING),
    Move.RELEASE: (_RUNNING, JobStatus.PENDING),
    Move.DEAD_LETTER: (_RUNNING, JobStatus.DEAD_LETTERED),
    # Retrying is for dead letters, never "run again" for a job that is waiting or done.
    Move.RETRY: (frozenset({JobStatus.DEAD_LETTERED}), JobStatus.PENDING),
}


class IllegalTransition(ValueError):
    def __init__(self, status: str | None, move: Move) -> None:
        super().__init__(f"a job that is {status or 'new'} cannot {move.value}")
        self.status, self.move = status, move


def allows(status: str | None, move: Move) -> bool:
    """Whether `move` may start from `status`."""
    return status in TRANSITIONS[move][0]


def sources(move: Move) -> list[JobStatus]:
    """The stored statuses `move` may start from, for a query's `status__in`."""
    return sorted(status for status in TRANSITIONS[move][0] if status is not None)


def target(move: Move) -> JobStatus:
    """The status `move` leads to."""
    return TRANSITIONS[move][1]


def after(status: str | None, move: Move) -> JobStatus:
    """The status `move` leads to from `status` (None: a job not created yet); raises
    IllegalTransition when the move is not allowed from there."""
    if not allows(status, move):
        raise IllegalTransition(status, move)
    return target(move)
