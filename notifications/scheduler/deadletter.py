"""Where a handled occurrence leaves its schedule, and the dead-letter plans: an occurrence
given up (attempts used up, a permanent error, a crashing row) and a schedule whose next
occurrence cannot be computed. No database access."""

import logging
from datetime import datetime
from typing import Any

from notifications.models import WHOLE_OCCURRENCE, Delivery, DeliveryOutcome, Notification
from notifications.recurrence import CpuBudget, InvalidRecurrence
from notifications.recurrence.skipped import next_and_skipped
from notifications.scheduler.deliver import due_time
from notifications.scheduler.outcomes import DeadLetterReason
from notifications.scheduler.rowplan import Branch, Bucket, Policy, RowPlan, delivery_row
from notifications.states import Move, after

logger = logging.getLogger("notifications.scheduler")


def advance(
    row: Notification, *, now: datetime, budget: CpuBudget
) -> tuple[datetime | None, Delivery | None]:
    """Where a handled occurrence leaves the schedule: the next regular occurrence, the
    first after both the handled one and now (None for a one-shot or a schedule that its
    COUNT or UNTIL ended), and the `skipped` record of the occurrences in between, which
    "fire once now" will never deliver (None when there are none). Raises
    InvalidRecurrence (RuleTooCostly past `budget`) when the next occurrence cannot be
    computed: that is never the end of the schedule."""
    if not row.rrule:
        return None, None
    handled = due_time(row) or now
    upcoming, found = next_and_skipped(
        rrule=row.rrule,
        tz_name=row.timezone,
        anchor=row.recurrence_anchor or handled,
        handled=handled,
        now=now,
        budget=budget,
    )
    if found is None:
        return upcoming, None
    return upcoming, delivery_row(
        row,
        at=now,
        channel=WHOLE_OCCURRENCE,
        outcome=DeliveryOutcome.SKIPPED,
        skipped_count=found.count,
        skipped_first=found.first,
        skipped_last=found.last,
    )


def dead_letter(
    row: Notification,
    token: int,
    *,
    reason: DeadLetterReason,
    summary: str,
    error_count: int,
    now: datetime,
    policy: Policy,
) -> RowPlan:
    """Record the occurrence as dead-lettered; a recurring row skips to its next regular
    occurrence with a clean error count, anything else stays on it, dead-lettered
    (next_fire_at NULL)."""
    try:
        upcoming, skipped = advance(row, now=now, budget=policy.recurrence_budget)
    except InvalidRecurrence as exc:
        return invalid_schedule(row, token, exc, now=now, fired=False)
    return _dead_letter_plan(
        row,
        token,
        reason=reason,
        summary=summary,
        now=now,
        skipped=skipped,
        next_fire_at=upcoming,
        occurrence=row.occurrence + (1 if upcoming else 0),
        error_count=0 if upcoming else error_count,
        dead_letter_reason="" if upcoming else reason.value,
        state=after(row.state, Move.DEAD_LETTER_AND_GO_ON if upcoming else Move.DEAD_LETTER),
    )


def invalid_schedule(
    row: Notification, token: int, exc: InvalidRecurrence, *, now: datetime, fired: bool
) -> RowPlan:
    """The schedule's next occurrence cannot be computed (past the CPU budget, or a rule
    that no longer parses): the row is dead-lettered with category invalid_schedule and
    logged — never completed as if its schedule had ended, never left claimed to stall the
    next tick. `fired`: the occurrence itself was delivered."""
    logger.warning("row %s: schedule dead-lettered as invalid_schedule: %s", row.pk, exc)
    fired_changes = {"last_fired_at": now} if fired else {}
    return _dead_letter_plan(
        row,
        token,
        reason=DeadLetterReason.INVALID_SCHEDULE,
        summary=f"{DeadLetterReason.INVALID_SCHEDULE}: {exc}",
        now=now,
        next_fire_at=None,
        occurrence=row.occurrence,
        error_count=0 if fired else row.error_count,
        dead_letter_reason=DeadLetterReason.INVALID_SCHEDULE.value,
        state=after(row.state, Move.DEAD_LETTER),
        **fired_changes,
    )


def _dead_letter_plan(
    row: Notification,
    token: int,
    *,
    reason: DeadLetterReason,
    summary: str,
    now: datetime,
    skipped: Delivery | None = None,
    **changes: Any,
) -> RowPlan:
    changes.update(
        {
            # A dead-lettered row keeps the due time of the occurrence it stopped on.
            "due_at": changes["next_fire_at"] or row.due_at,
            "last_error": summary[:500],
            "unfinished_claims": 0,
            "channel_state": {},
            # A re-armed occurrence that sends its email again does so in a new batch.
            "email_batch": None,
            "updated_at": now,
        }
    )
    log = delivery_row(
        row,
        at=now,
        channel=WHOLE_OCCURRENCE,
        outcome=DeliveryOutcome.DEAD_LETTERED,
        error_category=reason.value,
        error=summary[:500],
    )
    return RowPlan(
        pk=row.pk,
        token=token,
        branch=Branch.DEAD_LETTER,
        bucket=Bucket.DEAD_LETTERED,
        changes=changes,
        logs=(log,),
        skipped=skipped,
    )
