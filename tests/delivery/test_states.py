"""The state machine of a notification: every allowed move and where it leads, every
refused one, and the state each write-back of the tick puts in its fenced statement."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from delivery.models import Notification
from delivery.recurrence import InvalidRecurrence
from delivery.scheduler.deliver import Deferral, RowDelivery
from delivery.scheduler.plan import (
    Policy,
    invalid_schedule,
    plan_crashed,
    plan_delivery,
    plan_release,
)
from delivery.states import TRANSITIONS, IllegalTransition, Move, after, allows
from delivery.states import NotificationState as S
from delivery.transports.base import DeliveryResult
from outbound.categories import ErrorCategory

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
POLICY = Policy(backoff=(60, 300, 1800))
OK = DeliveryResult(ok=True, http_status=200)
HTTP_500 = DeliveryResult(ok=False, category=ErrorCategory.HTTP_5XX, http_status=500)
HTTP_404 = DeliveryResult(
    ok=False, category=ErrorCategory.HTTP_4XX, http_status=404, permanent=True
)
CLAIMED = [S.SCHEDULED, S.BACKING_OFF]

ALLOWED = [
    # (from, move, to)
    (None, Move.CREATE, S.SCHEDULED),
    *((s, Move.ADVANCE, S.SCHEDULED) for s in CLAIMED),
    *((s, Move.COMPLETE, S.COMPLETED) for s in CLAIMED),
    *((s, Move.BACK_OFF, S.BACKING_OFF) for s in CLAIMED),
    *((s, Move.DEFER, s) for s in CLAIMED),
    *((s, Move.RELEASE, s) for s in CLAIMED),
    *((s, Move.DEAD_LETTER, S.DEAD_LETTERED) for s in CLAIMED),
    *((s, Move.DEAD_LETTER_AND_GO_ON, S.SCHEDULED) for s in CLAIMED),
    *((s, Move.RESCHEDULE, S.SCHEDULED) for s in S),
    *((s, Move.RETRY, S.SCHEDULED) for s in (S.DEAD_LETTERED, S.BACKING_OFF, S.PARKED)),
    *((s, Move.PARK, S.PARKED) for s in CLAIMED),
    *((s, Move.UNPARK, S.SCHEDULED) for s in (S.DEAD_LETTERED, S.PARKED)),
]


@pytest.mark.parametrize(("state", "move", "target"), ALLOWED)
def test_an_allowed_move_leads_to_its_state(state, move, target):
    assert allows(state, move)
    assert after(state, move) == target


def test_the_table_allows_exactly_the_moves_listed_here():
    listed = {(state, move) for state, move, _ in ALLOWED}
    in_table = {(state, move) for move, (starts, _) in TRANSITIONS.items() for state in starts}
    assert in_table == listed


REFUSED = [
    (state, move)
    for move in Move
    for state in [None, *S]
    if (state, move) not in {(s, m) for s, m, _ in ALLOWED}
]


@pytest.mark.parametrize(("state", "move"), REFUSED)
def test_a_move_the_table_does_not_allow_is_refused(state, move):
    assert not allows(state, move)
    with pytest.raises(IllegalTransition):
        after(state, move)


def test_nothing_but_a_reschedule_leaves_completed_and_only_parking_leads_to_parked():
    leaving_completed = {m for m in Move if allows(S.COMPLETED, m)}
    assert leaving_completed == {Move.RESCHEDULE}
    assert {m for m, (_, target) in TRANSITIONS.items() if target == S.PARKED} == {Move.PARK}


def _row(state=S.SCHEDULED, **fields) -> Notification:
    values = {
        "id": uuid.uuid4(),
        "tenant_id": uuid.uuid4(),
        "channels": ["webhook"],
        "next_fire_at": NOW,
        "due_at": NOW,
        "recurrence_anchor": NOW,
        "state": state,
        "max_attempts": 3,
        "claim_token": 1,
        **fields,
    }
    return Notification(**values)


def _plan(row: Notification, result: DeliveryResult | None = None, **delivery):
    results = {} if result is None else {"webhook": result}
    return plan_delivery(
        RowDelivery(row, results=results, attempted_at=NOW, **delivery),
        token=1,
        now=NOW,
        policy=POLICY,
    )


@pytest.mark.parametrize("state", CLAIMED)
def test_a_delivered_one_shot_is_completed_not_deleted(state):
    plan = _plan(_row(state, error_count=1 if state == S.BACKING_OFF else 0), OK)
    assert plan.move is Move.COMPLETE
    assert plan.changes["state"] == S.COMPLETED
    assert (plan.changes["next_fire_at"], plan.changes["error_count"]) == (None, 0)


def test_a_delivered_recurring_row_advances_scheduled():
    plan = _plan(_row(S.BACKING_OFF, error_count=2, rrule="FREQ=DAILY"), OK)
    assert (plan.move, plan.changes["state"]) == (Move.ADVANCE, S.SCHEDULED)


def test_a_rule_past_its_count_is_completed():
    plan = _plan(_row(rrule="FREQ=DAILY;COUNT=1"), OK)
    assert (plan.move, plan.changes["state"]) == (Move.COMPLETE, S.COMPLETED)


def test_a_failure_with_attempts_left_backs_off():
    plan = _plan(_row(), HTTP_500)
    assert (plan.move, plan.changes["state"]) == (Move.BACK_OFF, S.BACKING_OFF)


def test_the_rows_own_attempt_limit_decides_the_dead_letter():
    plan = _plan(_row(S.BACKING_OFF, error_count=1, max_attempts=2), HTTP_500)
    assert (plan.move, plan.changes["state"]) == (Move.DEAD_LETTER, S.DEAD_LETTERED)
    plan = _plan(_row(S.BACKING_OFF, error_count=1, max_attempts=5), HTTP_500)
    assert (plan.move, plan.changes["state"]) == (Move.BACK_OFF, S.BACKING_OFF)


def test_a_permanent_failure_dead_letters_a_one_shot_and_moves_a_recurring_row_on():
    assert _plan(_row(), HTTP_404).changes["state"] == S.DEAD_LETTERED
    plan = _plan(_row(rrule="FREQ=DAILY"), HTTP_404)
    assert (plan.move, plan.changes["state"]) == (Move.DEAD_LETTER_AND_GO_ON, S.SCHEDULED)


@pytest.mark.parametrize("state", CLAIMED)
def test_a_deferral_and_a_release_keep_the_state(state):
    row = _row(state, error_count=1 if state == S.BACKING_OFF else 0)
    deferred = {"webhook": Deferral(until=NOW + timedelta(minutes=1), reason="circuit_open")}
    plan = _plan(row, deferred=deferred)
    assert (plan.move, plan.changes["state"]) == (Move.DEFER, state)
    plan = plan_release(row, token=1)
    assert (plan.move, plan.changes["state"]) == (Move.RELEASE, state)


def test_a_crashed_row_and_an_invalid_schedule_are_dead_lettered():
    plan = plan_crashed(_row(unfinished_claims=4), token=1, now=NOW, policy=POLICY)
    assert plan.changes["state"] == S.DEAD_LETTERED
    plan = invalid_schedule(
        _row(rrule="FREQ=DAILY"), 1, InvalidRecurrence("broken"), now=NOW, fired=True
    )
    assert plan.changes["state"] == S.DEAD_LETTERED


def test_a_plan_from_a_row_that_no_claim_could_hold_is_refused():
    with pytest.raises(IllegalTransition):
        _plan(_row(S.COMPLETED), OK)
