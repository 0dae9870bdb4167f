"""Turn one row's delivery (or a poison claim) into the write-back it needs: which fenced
statement (branch), the new column values, and the delivery-log rows. No database access.

An occurrence is settled channel by channel: a channel that was deferred (its endpoint's
circuit is open) was not attempted, so the occurrence stays open for it alone while the
channels already delivered are remembered in `channel_state` and never sent again. The
partial-success rule (`_verdict`) applies to channels that failed. The plan types live in
rowplan.py, the schedule's advance and the dead-letter plans in deadletter.py; their public
names are importable from here too."""

import dataclasses
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from dbqueue.backoff import retry_delay
from notifications.circuits import Signal
from notifications.models import Delivery, DeliveryOutcome, Notification
from notifications.recurrence import InvalidRecurrence
from notifications.scheduler import outcomes
from notifications.scheduler.deadletter import advance, dead_letter, invalid_schedule
from notifications.scheduler.deliver import Deferral, RowDelivery, due_time
from notifications.scheduler.outcomes import (
    Classification,
    DeadLetterReason,
    DeferralReason,
    Verdict,
)
from notifications.scheduler.rowplan import (
    Branch,
    Bucket,
    Policy,
    RowPlan,
    delivery_row,
    late_ms,
)
from notifications.states import Move, after
from outbound.categories import ErrorCategory

__all__ = [
    "Branch",
    "Bucket",
    "ChannelState",
    "Policy",
    "RowPlan",
    "advance",
    "dead_letter",
    "invalid_schedule",
    "late_ms",
    "plan_delivery",
    "plan_poison",
    "plan_release",
]


class ChannelState(StrEnum):
    """How a channel of the open occurrence ended (the values of `channel_state`): the
    delivery log's outcomes of a settled attempt, so one state is never spelled twice."""

    DELIVERED = DeliveryOutcome.DELIVERED.value
    FAILED = DeliveryOutcome.FAILED.value


def plan_delivery(
    delivery: RowDelivery,
    *,
    token: int,
    now: datetime,
    policy: Policy,
    endpoint_signal: tuple[Any, Signal] | None = None,
) -> RowPlan:
    """The write-back for a delivered (or wholly deferred) row, per the partial-success
    rule over the occurrence's channels; `endpoint_signal` is the webhook attempt's news
    for its endpoint's circuit, written with the row."""
    delivery = _with_backpressure_deferred(delivery, now=now, policy=policy)
    row = delivery.notification
    state = {**row.channel_state, **_settled(delivery)}
    verdict, failed = _verdict(row, state)
    if verdict is Verdict.FAILURE:
        plan = _failure(delivery, token, now=now, policy=policy)
    elif delivery.deferred:
        until = min(deferral.until for deferral in delivery.deferred.values())
        plan = _defer(row, token, state, until=until, now=now)
    else:
        plan = _finish(row, token, verdict, failed, now=now, policy=policy)
    gone = any(r.gone for r in delivery.results.values())
    return dataclasses.replace(
        plan,
        logs=(*_channel_logs(delivery), *_deferral_logs(delivery), *plan.logs),
        gone_endpoint_id=row.webhook_endpoint_id if gone else None,
        endpoint_signal=endpoint_signal,
    )


def _verdict(row: Notification, state: dict[str, str]) -> tuple[Verdict, tuple[str, ...]]:
    """The partial-success rule, over the occurrence's channels as settled so far: a
    failure when some failed and none was delivered (it earns a retry), else a success or,
    with failed channels, a partial success (they are not retried). Also the failed ones."""
    failed = tuple(c for c in row.channels if state.get(c) == ChannelState.FAILED)
    delivered = any(value == ChannelState.DELIVERED for value in state.values())
    if failed and not delivered:
        return Verdict.FAILURE, failed
    return (Verdict.PARTIAL if failed else Verdict.SUCCESS), failed


def _finish(
    row: Notification,
    token: int,
    verdict: Verdict,
    failed: tuple[str, ...],
    *,
    now: datetime,
    policy: Policy,
) -> RowPlan:
    """Every channel settled and at least one delivered (or none failed): the occurrence
    is done; the channels that failed are not retried (a partial success)."""
    bucket = Bucket.DELIVERED if verdict is Verdict.SUCCESS else Bucket.PARTIAL
    try:
        upcoming, skipped = advance(row, now=now, budget=policy.recurrence_budget)
    except InvalidRecurrence as exc:
        return invalid_schedule(row, token, exc, now=now, fired=True)
    c = Classification(verdict=verdict, failed=failed, all_permanent=False, retry_after=None)
    changes = {
        "last_fired_at": now,
        "error_count": 0,
        "last_error": None if verdict is Verdict.SUCCESS else outcomes.partial_summary(c),
        "dead_letter_reason": "",
        "unfinished_claims": 0,
        "channel_state": {},
        "email_batch": None,
        "updated_at": now,
    }
    if upcoming is None:
        # Finished: kept for reading, on the occurrence it last delivered.
        branch, move = Branch.COMPLETE, Move.COMPLETE
        changes.update(next_fire_at=None, due_at=row.due_at, occurrence=row.occurrence)
    else:
        branch, move = Branch.ADVANCE, Move.ADVANCE
        changes.update(next_fire_at=upcoming, due_at=upcoming, occurrence=row.occurrence + 1)
    changes["state"] = after(row.state, move)
    return RowPlan(
        pk=row.pk, token=token, branch=branch, bucket=bucket, changes=changes, skipped=skipped
    )


def _defer(
    row: Notification, token: int, state: dict[str, str], *, until: datetime, now: datetime
) -> RowPlan:
    """Some channels were deferred unattempted: the occurrence stays open for them alone,
    without an error, at the time they may go."""
    changes = {
        "channel_state": state,
        "next_fire_at": until,
        "unfinished_claims": 0,
        "updated_at": now,
        "state": after(row.state, Move.DEFER),
    }
    return RowPlan(
        pk=row.pk, token=token, branch=Branch.DEFER, bucket=Bucket.DEFERRED, changes=changes
    )


def plan_release(row: Notification, *, token: int) -> RowPlan:
    """Give a claimed row back unattempted (its endpoint had no free slot): the lease ends
    and the claim is not counted against it."""
    changes = {
        "unfinished_claims": max(row.unfinished_claims - 1, 0),
        "state": after(row.state, Move.RELEASE),
    }
    return RowPlan(
        pk=row.pk, token=token, branch=Branch.RELEASE, bucket=Bucket.RELEASED, changes=changes
    )


def _with_backpressure_deferred(
    delivery: RowDelivery, *, now: datetime, policy: Policy
) -> RowDelivery:
    """A channel whose provider pushed back ("later": 429, 503 with Retry-After) was not
    refused: it is deferred to the time named (or the first backoff step when none was),
    with no attempt counted — until `max_defer_seconds` after the occurrence was due, when
    the push-back counts as a failure (category rate_limited) like any other."""
    pushed = {c: r for c, r in delivery.results.items() if r.backpressure}
    if not pushed:
        return delivery
    due = due_time(delivery.notification) or now
    if (now - due).total_seconds() >= policy.max_defer_seconds:
        results = {
            c: dataclasses.replace(r, category=ErrorCategory.RATE_LIMITED) if c in pushed else r
            for c, r in delivery.results.items()
        }
        return dataclasses.replace(delivery, results=results)
    deferred = dict(delivery.deferred)
    for channel, result in pushed.items():
        wait = result.retry_after if result.retry_after is not None else policy.backoff[0]
        until = now + timedelta(seconds=max(wait, 1.0))
        deferred[channel] = Deferral(until=until, reason=DeferralReason.RATE_LIMITED)
    results = {c: r for c, r in delivery.results.items() if c not in pushed}
    return dataclasses.replace(delivery, results=results, deferred=deferred)


def _settled(delivery: RowDelivery) -> dict[str, str]:
    return {
        channel: ChannelState.DELIVERED if result.ok else ChannelState.FAILED
        for channel, result in delivery.results.items()
    }


def _failure(delivery: RowDelivery, token: int, *, now: datetime, policy: Policy) -> RowPlan:
    """Nothing of the occurrence was delivered and what was attempted failed: back off, or
    dead-letter when the attempts are used up or every error is permanent."""
    row = delivery.notification
    c = outcomes.classify(delivery.results)
    summary = outcomes.error_summary(delivery.results)
    failures = row.error_count + 1
    reason = outcomes.dead_letter_reason(
        c, error_count_after=failures, max_attempts=row.max_attempts
    )
    if reason is not None:
        return dead_letter(
            row,
            token,
            reason=reason,
            summary=summary,
            error_count=failures,
            now=now,
            policy=policy,
        )
    delay = retry_delay(
        failures_before=row.error_count, steps=policy.backoff, retry_after=c.retry_after
    )
    changes = {
        "next_fire_at": now + timedelta(seconds=delay),
        "error_count": failures,
        "last_error": summary[:500],
        "unfinished_claims": 0,
        "updated_at": now,
        "state": after(row.state, Move.BACK_OFF),
    }
    return RowPlan(
        pk=row.pk, token=token, branch=Branch.BACKOFF, bucket=Bucket.FAILED, changes=changes
    )


def _channel_logs(delivery: RowDelivery) -> list[Delivery]:
    logs = []
    late = late_ms(delivery.notification, at=delivery.attempted_at)
    for channel, result in delivery.results.items():
        if result.ok:
            outcome = DeliveryOutcome.DELIVERED
        elif result.category == ErrorCategory.TIMEOUT:
            outcome = DeliveryOutcome.TIMEOUT
        else:
            outcome = DeliveryOutcome.FAILED
        logs.append(
            delivery_row(
                delivery.notification,
                at=delivery.attempted_at,
                channel=channel,
                outcome=outcome,
                http_status=result.http_status,
                error_category=result.category,
                error=result.error[:500],
                duration_ms=max(result.duration_ms, 0),
                late_ms=late,
            )
        )
    return logs


def _deferral_logs(delivery: RowDelivery) -> list[Delivery]:
    return [
        delivery_row(
            delivery.notification,
            at=delivery.attempted_at,
            channel=channel,
            outcome=DeliveryOutcome.DEFERRED,
            error_category=deferral.reason,
            error=f"deferred until {deferral.until.isoformat()}",
        )
        for channel, deferral in delivery.deferred.items()
    ]


def plan_poison(row: Notification, *, token: int, now: datetime, policy: Policy) -> RowPlan:
    """A row whose previous claims all died before writing back: dead-letter, no delivery."""
    summary = f"{DeadLetterReason.CRASHED}: no outcome after {row.unfinished_claims - 1} claims"
    return dead_letter(
        row,
        token,
        reason=DeadLetterReason.CRASHED,
        summary=summary,
        error_count=row.error_count,
        now=now,
        policy=policy,
    )
