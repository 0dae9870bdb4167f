"""The life of a notification: the states it is stored in and the only moves between them.

A notification's `state` is a stored column, written by the same statement that moves the
row: run_tick's fenced write-backs and the services' guarded updates ask `after()` for the
state a move leads to, and a move the table below does not allow from the row's state is
refused (IllegalTransition), never written. A claim moves no state: a claimed row stays
`scheduled` or `backing_off` until its write-back says where it goes.

- scheduled: waiting for its occurrence (or due now), no failed attempt of it yet.
- backing_off: its occurrence failed and waits for a retry.
- dead_lettered: its occurrence was given up (attempts used up, a permanent error, a worker
  that crashed on it every time, a schedule that cannot be computed); off the schedule
  until a retry or an unpark, its error kept for inspection.
- parked: off the schedule with its error state but no dead-letter record: a pending
  delivery of an endpoint that was disabled as failing (webhooks.lifecycle), or a row
  migration 0010 put here (an error count at a since lowered MAX_ATTEMPTS, or no next fire
  time and no reason). A retry, an unpark or the endpoint's re-enabling takes it back.
- completed: delivered, and its schedule is over (a one-shot, or a rule past its COUNT or
  UNTIL); kept so a client can still read it, pruned with the delivery log.

Also here, so that the models need nothing from the scheduler: why an occurrence was
dead-lettered (`DeadLetterReason`)."""

from collections.abc import Mapping
from enum import StrEnum

from django.db import models

from outbound.categories import ErrorCategory


class NotificationState(models.TextChoices):
    SCHEDULED = "scheduled", "Scheduled"
    BACKING_OFF = "backing_off", "Backing off"
    DEAD_LETTERED = "dead_lettered", "Dead-lettered"
    PARKED = "parked", "Parked"
    COMPLETED = "completed", "Completed"


class Move(StrEnum):
    """What happens to a row. The tick's moves start from a claimed row; the services'
    from a row no lease holds."""

    CREATE = "create"
    # The occurrence is settled (delivered, or partly) and the schedule goes on.
    ADVANCE = "advance"
    # The occurrence is settled and the schedule is over.
    COMPLETE = "complete"
    BACK_OFF = "back_off"
    # Channels deferred unattempted, or the row given back unattempted: no attempt counted.
    DEFER = "defer"
    RELEASE = "release"
    # The occurrence is given up and the row stays on it (a one-shot, an ended schedule).
    DEAD_LETTER = "dead_letter"
    # The occurrence of a recurring row is given up and the row goes on to the next one.
    DEAD_LETTER_AND_GO_ON = "dead_letter_and_go_on"
    # PATCH of fire_at, rrule or timezone: the schedule starts afresh.
    RESCHEDULE = "reschedule"
    RETRY = "retry"
    # Its endpoint was disabled as failing: kept, off the schedule, until it is enabled.
    PARK = "park"
    UNPARK = "unpark"


# The states the due query (and the due index) hold: every claimed row is in one of them.
CLAIMABLE = (NotificationState.SCHEDULED, NotificationState.BACKING_OFF)
_OFF_SCHEDULE = frozenset({NotificationState.DEAD_LETTERED, NotificationState.PARKED})
_ANY = frozenset(NotificationState)
# A move whose target is KEEP leaves the state as it is.
KEEP = None

# move -> (the states it may start from, the state it leads to); None stands for "no row
# yet" among the sources.
TRANSITIONS: Mapping[Move, tuple[frozenset, NotificationState | None]] = {
    Move.CREATE: (frozenset({None}), NotificationState.SCHEDULED),
    Move.ADVANCE: (frozenset(CLAIMABLE), NotificationState.SCHEDULED),
    Move.COMPLETE: (frozenset(CLAIMABLE), NotificationState.COMPLETED),
    Move.BACK_OFF: (frozenset(CLAIMABLE), NotificationState.BACKING_OFF),
    Move.DEFER: (frozenset(CLAIMABLE), KEEP),
    Move.RELEASE: (frozenset(CLAIMABLE), KEEP),
    Move.DEAD_LETTER: (frozenset(CLAIMABLE), NotificationState.DEAD_LETTERED),
    Move.DEAD_LETTER_AND_GO_ON: (frozenset(CLAIMABLE), NotificationState.SCHEDULED),
    # A completed row given a new schedule fires again (as a new occurrence).
    Move.RESCHEDULE: (_ANY, NotificationState.SCHEDULED),
    # Retrying is for failing rows, never "fire now" for a healthy or finished one.
    Move.RETRY: (_OFF_SCHEDULE | {NotificationState.BACKING_OFF}, NotificationState.SCHEDULED),
    Move.PARK: (frozenset(CLAIMABLE), NotificationState.PARKED),
    Move.UNPARK: (_OFF_SCHEDULE, NotificationState.SCHEDULED),
}


class IllegalTransition(ValueError):
    def __init__(self, state: str | None, move: Move) -> None:
        super().__init__(f"a notification that is {state or 'new'} cannot {move.value}")
        self.state, self.move = state, move


def allows(state: str | None, move: Move) -> bool:
    """Whether `move` may start from `state`."""
    return state in TRANSITIONS[move][0]


def after(state: str | None, move: Move) -> NotificationState:
    """The state `move` leads to from `state` (None: a row not created yet); raises
    IllegalTransition when the move is not allowed from there."""
    if not allows(state, move):
        raise IllegalTransition(state, move)
    target = TRANSITIONS[move][1]
    if target is not KEEP:
        return target
    assert state is not None  # no move that keeps the state is allowed from None
    return NotificationState(state)


class DeadLetterReason(models.TextChoices):
    """Why an occurrence was dead-lettered: the one definition the model's choices, the
    delivery log and the API share. Where a reason is also an attempt's error category, it
    is that category's value."""

    EXHAUSTED = "exhausted", "Retries exhausted"
    PERMANENT = "permanent", "Permanent error"
    CRASHED = ErrorCategory.CRASHED.value, "Crashed the worker repeatedly"
    RATE_LIMITED = ErrorCategory.RATE_LIMITED.value, "Rate limited past the deferral horizon"
    # The schedule's next occurrence could not be computed (too costly, or a rule that no
    # longer parses): the row is dead-lettered rather than deleted or left to stall the tick.
    INVALID_SCHEDULE = "invalid_schedule", "Next occurrence could not be computed"
