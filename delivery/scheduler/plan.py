"""What a claimed row's write-back is: the plan (RowPlan, immutable once built) of one row's
delivery, of a row given back unattempted, or of a row that crashed its worker, with the state
move its fenced statement makes (`delivery.states.Move`), where the tick summary counts
it (Bucket), the delivery-log rows it carries
and where it leaves the row's schedule. Pure decisions: no database access, no I/O.

An occurrence is settled channel by channel: a channel that was deferred (its endpoint's
circuit is open, its provider pushed back, no send budget) was not attempted, so the
occurrence stays open for it alone while the channels already delivered are remembered in
`channel_state` and never sent again. The partial-success rule (`verdict`) applies to the
channels that failed: a full failure backs off (`retry_delay`) or is dead-lettered
(`dead_letter_reason`); a partial success is not retried.
"""

import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from dbqueue.backoff import retry_delay
from dbtools.instances import fresh
from delivery.circuits import Signal
from delivery.copies import EMAIL, channel_of, recipient_of, units
from delivery.models import WHOLE_OCCURRENCE, Channel, Delivery, DeliveryOutcome, Notification
from delivery.occurrences import due_time
from delivery.recurrence import CpuBudget, InvalidRecurrence
from delivery.recurrence.skipped import next_and_skipped
from delivery.scheduler.deliver import Deferral, DeferralReason, RowDelivery
from delivery.states import DeadLetterReason, Move, after
from outbound.categories import ErrorCategory

logger = logging.getLogger("delivery.scheduler")


class ChannelResult(Protocol):
    """The fields of transports.base.DeliveryResult these decisions read (read-only: the
    result is frozen)."""

    @property
    def ok(self) -> bool: ...
    @property
    def error(self) -> str: ...
    @property
    def permanent(self) -> bool: ...
    @property
    def category(self) -> str: ...
    @property
    def http_status(self) -> int | None: ...
    @property
    def retry_after(self) -> float | None: ...
    @property
    def backpressure(self) -> bool: ...


class Verdict(StrEnum):
    SUCCESS = "success"
    PARTIAL = "partial"
    FAILURE = "failure"


class ChannelState(StrEnum):
    """How a channel of the open occurrence ended (the values of `channel_state`): the
    delivery log's outcomes of a settled attempt, so one state is never spelled twice."""

    DELIVERED = DeliveryOutcome.DELIVERED.value
    FAILED = DeliveryOutcome.FAILED.value
    # Not sent: the recipients opted out (people.preferences). Settled, neither
    # delivered nor failed.
    SUPPRESSED = DeliveryOutcome.SUPPRESSED.value


@dataclass(frozen=True)
class Classification:
    """A row's outcome. `failed` lists the failed channels in the row's channel order;
    `all_permanent` is true only for a full failure whose every error is permanent;
    `all_rate_limited` for one whose every error is a provider's push-back past the deferral
    horizon; `retry_after` is the longest Retry-After any failed channel asked for (seconds)."""

    verdict: Verdict
    failed: tuple[str, ...]
    all_permanent: bool
    retry_after: float | None
    all_rate_limited: bool = False


class Bucket(StrEnum):
    """Where a claimed row is counted in the tick summary (exactly one bucket per row); the
    names consume_jobs counts its outcomes under, where it has the same outcome."""

    DELIVERED = "delivered"
    PARTIAL = "partial"
    BACKED_OFF = "backed_off"
    DEFERRED = "deferred"
    RELEASED = "released"
    DEAD_LETTERED = "dead_lettered"
    # Finished without a send: every channel was suppressed (a recipient's preference).
    SUPPRESSED = "suppressed"


@dataclass(frozen=True)
class RowPlan:
    """A fenced write-back on (pk, token): update the row with `changes`, its new `state`
    among them (delivery.states decides it). `logs` are written whatever the fence
    says (the calls happened); `skipped`, the record of the occurrences a late recurring
    row jumps over, only if the write-back applies."""

    pk: Any
    token: int
    move: Move
    bucket: Bucket
    changes: dict[str, Any] = field(default_factory=dict)
    logs: tuple[Delivery, ...] = ()
    skipped: Delivery | None = None
    gone_endpoint_id: Any = None
    # The webhook attempt's news for its endpoint's circuit, when there is any.
    endpoint_signal: tuple[Any, Signal] | None = None


@dataclass(frozen=True)
class Policy:
    """How the tick treats failures; the attempt limit is each row's own (max_attempts)."""

    backoff: Sequence[int]
    # How long after an occurrence was due a provider's push-back still defers it for free.
    max_defer_seconds: float = 86_400.0
    # CPU one row may spend finding its schedule's next occurrence (RECURRENCE_BUDGET_MS).
    recurrence_budget_ms: float = 20.0

    @property
    def recurrence_budget(self) -> CpuBudget:
        return CpuBudget(limit_ms=self.recurrence_budget_ms)


def verdict(
    state: Mapping[str, str], *, channels: Iterable[str]
) -> tuple[Verdict, tuple[str, ...]]:
    """The partial-success rule, over channels as settled so far (`state`: ChannelState
    values): a failure when some of `channels` failed and none was delivered (it earns a
    retry), else a success or, with failed channels, a partial success (they are not
    retried). Also the failed ones, in the order of `channels`."""
    failed = tuple(c for c in channels if state.get(c) == ChannelState.FAILED)
    delivered = any(value == ChannelState.DELIVERED for value in state.values())
    if failed and not delivered:
        return Verdict.FAILURE, failed
    return (Verdict.PARTIAL if failed else Verdict.SUCCESS), failed


def classify(results: Mapping[str, ChannelResult]) -> Classification:
    """The `verdict` of these results alone (a full success also when there were none),
    with what deciding a full failure's fate needs."""
    verdict_of, failed = verdict(_settled(results), channels=results)
    waits = [wait for c in failed if (wait := results[c].retry_after) is not None]
    return Classification(
        verdict=verdict_of,
        failed=failed,
        all_permanent=verdict_of is Verdict.FAILURE and all(results[c].permanent for c in failed),
        retry_after=max(waits) if waits else None,
        all_rate_limited=verdict_of is Verdict.FAILURE
        and all(results[c].backpressure for c in failed),
    )


def _settled(results: Mapping[str, ChannelResult]) -> dict[str, str]:
    return {
        channel: ChannelState.DELIVERED if result.ok else ChannelState.FAILED
        for channel, result in results.items()
    }


def dead_letter_reason(
    classification: Classification, *, error_count_after: int, max_attempts: int
) -> DeadLetterReason | None:
    """Why a full failure is dead-lettered now, or None when it should back off (or when
    the row did not fully fail at all)."""
    if classification.verdict is not Verdict.FAILURE:
        return None
    if classification.all_permanent:
        return DeadLetterReason.PERMANENT
    if error_count_after >= max_attempts:
        if classification.all_rate_limited:
            return DeadLetterReason.RATE_LIMITED
        return DeadLetterReason.EXHAUSTED
    return None


def is_crashed(*, unfinished_claims: int, max_attempts: int) -> bool:
    """A row whose count of claims without an outcome (this claim included) exceeds
    `max_attempts`: its previous `max_attempts` claims all died before writing back."""
    return unfinished_claims > max_attempts


def describe(result: ChannelResult) -> str:
    """One channel's failure in a few safe words: "HTTP 500", "timeout", "connection"."""
    if result.http_status is not None:
        return f"HTTP {result.http_status}"
    return result.category or "failed"


def error_summary(results: Mapping[str, ChannelResult]) -> str:
    """The failed channels as "webhook: HTTP 500; email: timeout" (no bodies, no URLs, no
    recipients: an email's copies that failed alike are named once)."""
    failures = (f"{channel_of(unit)}: {describe(r)}" for unit, r in results.items() if not r.ok)
    return "; ".join(dict.fromkeys(failures))


def partial_summary(classification: Classification) -> str:
    return "partial: " + ", ".join(dict.fromkeys(map(channel_of, classification.failed)))


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
    state = {**row.channel_state, **_settled(delivery.results)}
    verdict_of, failed = verdict(state, channels=units(row))
    if verdict_of is Verdict.FAILURE:
        plan = _failure(delivery, token, now=now, policy=policy)
    elif retried := copies_to_retry(delivery, state):
        plan = _retry_copies(delivery, token, state, retried, now=now, policy=policy)
    elif delivery.deferred:
        until = min(deferral.until for deferral in delivery.deferred.values())
        plan = _defer(row, token, state, until=until, now=now)
    else:
        suppressed_only = all(value == ChannelState.SUPPRESSED for value in state.values())
        bucket = _bucket(verdict_of, suppressed_only=bool(state) and suppressed_only)
        plan = _finish(row, token, verdict_of, failed, bucket=bucket, now=now, policy=policy)
    gone = any(r.gone for r in delivery.results.values())
    return RowPlan(
        pk=plan.pk,
        token=plan.token,
        move=plan.move,
        bucket=plan.bucket,
        changes=plan.changes,
        logs=(
            *_channel_logs(delivery),
            *_deferral_logs(delivery),
            *_suppression_logs(delivery),
            *plan.logs,
        ),
        skipped=plan.skipped,
        gone_endpoint_id=row.webhook_endpoint_id if gone else None,
        endpoint_signal=endpoint_signal,
    )


def copies_to_retry(delivery: RowDelivery, state: Mapping[str, str]) -> tuple[str, ...]:
    """The copies of a partly sent email that failed this attempt and may be tried again:
    transiently, with attempts left. The email is not done while a copy of it is unsent,
    and each copy's progress is remembered, so retrying them sends nothing twice. An email
    none of whose copies went failed as a channel: the partial-success rule settles it
    among the row's channels, as it settles copies no attempt is left for."""
    row = delivery.notification
    if row.error_count + 1 >= row.max_attempts:
        return ()
    if not any(
        channel_of(unit) == EMAIL and value == ChannelState.DELIVERED
        for unit, value in state.items()
    ):
        return ()
    return tuple(
        unit
        for unit, result in delivery.results.items()
        if channel_of(unit) == EMAIL and recipient_of(unit) and not (result.ok or result.permanent)
    )


def _retry_copies(
    delivery: RowDelivery,
    token: int,
    state: dict[str, str],
    retried: tuple[str, ...],
    *,
    now: datetime,
    policy: Policy,
) -> RowPlan:
    """Some copies failed while others of the email went: they back off, counting an
    attempt, and go again alone (the units settled stay settled) — sooner when a copy
    deferred meanwhile may go sooner."""
    row = delivery.notification
    failed = {unit: delivery.results[unit] for unit in retried}
    waits = [wait for result in failed.values() if (wait := result.retry_after) is not None]
    delay = retry_delay(
        failures_before=row.error_count,
        steps=policy.backoff,
        retry_after=max(waits) if waits else None,
    )
    until = min([now + timedelta(seconds=delay), *(d.until for d in delivery.deferred.values())])
    changes = {
        "channel_state": {unit: value for unit, value in state.items() if unit not in failed},
        "next_fire_at": until,
        "error_count": row.error_count + 1,
        "last_error": error_summary(failed)[:500],
        "unfinished_claims": 0,
        "updated_at": now,
        "state": after(row.state, Move.BACK_OFF),
    }
    return RowPlan(
        pk=row.pk, token=token, move=Move.BACK_OFF, bucket=Bucket.BACKED_OFF, changes=changes
    )


def _bucket(verdict_of: Verdict, *, suppressed_only: bool) -> Bucket:
    """Where a finished occurrence counts: delivered, partial, or suppressed when nothing
    of it was sent because every channel was suppressed."""
    if verdict_of is Verdict.PARTIAL:
        return Bucket.PARTIAL
    return Bucket.SUPPRESSED if suppressed_only else Bucket.DELIVERED


def _finish(
    row: Notification,
    token: int,
    verdict_of: Verdict,
    failed: tuple[str, ...],
    *,
    bucket: Bucket,
    now: datetime,
    policy: Policy,
) -> RowPlan:
    """Every channel settled and at least one delivered (or none failed): the occurrence
    is done; the channels that failed are not retried (a partial success)."""
    try:
        upcoming, skipped = advance(row, now=now, budget=policy.recurrence_budget)
    except InvalidRecurrence as exc:
        return invalid_schedule(row, token, exc, now=now, fired=True)
    c = Classification(verdict=verdict_of, failed=failed, all_permanent=False, retry_after=None)
    changes = {
        "last_fired_at": now,
        "error_count": 0,
        "last_error": None if verdict_of is Verdict.SUCCESS else partial_summary(c),
        "dead_letter_reason": "",
        "unfinished_claims": 0,
        "channel_state": {},
        "email_batch": None,
        "updated_at": now,
    }
    if upcoming is None:
        # Finished: kept for reading, on the occurrence it last delivered.
        move = Move.COMPLETE
        changes.update(next_fire_at=None, due_at=row.due_at, occurrence=row.occurrence)
    else:
        move = Move.ADVANCE
        changes.update(next_fire_at=upcoming, due_at=upcoming, occurrence=row.occurrence + 1)
    changes["state"] = after(row.state, move)
    return RowPlan(
        pk=row.pk, token=token, move=move, bucket=bucket, changes=changes, skipped=skipped
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
    return RowPlan(pk=row.pk, token=token, move=Move.DEFER, bucket=Bucket.DEFERRED, changes=changes)


def plan_release(row: Notification, *, token: int) -> RowPlan:
    """Give a claimed row back unattempted (its endpoint had no free slot): the lease ends
    and the claim is not counted against it."""
    changes = {
        "unfinished_claims": max(row.unfinished_claims - 1, 0),
        "state": after(row.state, Move.RELEASE),
    }
    return RowPlan(
        pk=row.pk, token=token, move=Move.RELEASE, bucket=Bucket.RELEASED, changes=changes
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


def _failure(delivery: RowDelivery, token: int, *, now: datetime, policy: Policy) -> RowPlan:
    """Nothing of the occurrence was delivered and what was attempted failed: back off, or
    dead-letter when the attempts are used up or every error is permanent."""
    row = delivery.notification
    c = classify(delivery.results)
    summary = error_summary(delivery.results)
    failures = row.error_count + 1
    reason = dead_letter_reason(c, error_count_after=failures, max_attempts=row.max_attempts)
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
        pk=row.pk, token=token, move=Move.BACK_OFF, bucket=Bucket.BACKED_OFF, changes=changes
    )


def _channel_logs(delivery: RowDelivery) -> list[Delivery]:
    logs = []
    late = late_ms(delivery.notification, at=delivery.attempted_at)
    for unit, result in delivery.results.items():
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
                channel=channel_of(unit),
                recipient=recipient_of(unit),
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
            channel=channel_of(unit),
            recipient=recipient_of(unit),
            outcome=DeliveryOutcome.DEFERRED,
            error_category=deferral.reason,
            error=f"deferred until {deferral.until.isoformat()}",
        )
        for unit, deferral in delivery.deferred.items()
    ]


def _suppression_logs(delivery: RowDelivery) -> list[Delivery]:
    """The channels a product's decision suppressed on this claim (the recipients'
    preferences), never sent."""
    return [
        delivery_row(
            delivery.notification,
            at=delivery.attempted_at,
            channel=channel_of(unit),
            recipient=recipient_of(unit),
            outcome=DeliveryOutcome.SUPPRESSED,
            error_category=reason,
            error=f"not sent: {reason}"[:500],
        )
        for unit, reason in delivery.notification.suppressed_channels.items()
    ]


def plan_crashed(row: Notification, *, token: int, now: datetime, policy: Policy) -> RowPlan:
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
        move=Move.DEAD_LETTER_AND_GO_ON if upcoming else Move.DEAD_LETTER,
    )


def invalid_schedule(
    row: Notification, token: int, exc: InvalidRecurrence, *, now: datetime, fired: bool
) -> RowPlan:
    """The schedule's next occurrence cannot be computed (past the CPU budget, or a rule
    that no longer parses): the row is dead-lettered with category invalid_schedule and
    logged — never completed as if its schedule had ended, never left claimed to stall the
    next tick. `fired`: the occurrence itself was delivered."""
    logger.warning("row %s: schedule dead-lettered as invalid_schedule: %s", row.pk, exc)
    fired_changes: dict[str, Any] = {"last_fired_at": now} if fired else {}
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
        move=Move.DEAD_LETTER,
        **fired_changes,
    )


def _dead_letter_plan(
    row: Notification,
    token: int,
    *,
    reason: DeadLetterReason,
    summary: str,
    now: datetime,
    move: Move,
    skipped: Delivery | None = None,
    **changes: Any,
) -> RowPlan:
    changes.update(
        {
            "state": after(row.state, move),
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
        move=move,
        bucket=Bucket.DEAD_LETTERED,
        changes=changes,
        logs=(log,),
        skipped=skipped,
    )


def late_ms(notification: Notification, *, at: datetime) -> int | None:
    """How late an attempt at `at` is for the time the row was scheduled for (0 when early):
    its `next_fire_at` as claimed, which is the occurrence's due time on a first attempt,
    the end of its backoff on a retry and the end of its deferral for a deferred channel.
    Lateness measures the scheduler: a receiver's failures make retries, not lateness."""
    scheduled = notification.next_fire_at
    if scheduled is None:
        return None
    return max(0, (at - scheduled) // timedelta(milliseconds=1))


def delivery_row(notification: Notification, *, at: datetime, **fields: Any) -> Delivery:
    """A delivery-log row of the notification's current occurrence (as claimed: its
    `error_count` counts the failed attempts before this one)."""
    channel = fields.get("channel")
    endpoint_id = None if channel == Channel.EMAIL else notification.webhook_endpoint_id
    return fresh(
        Delivery,
        notification_id=notification.id,
        tenant_id=notification.tenant_id,
        occurrence=notification.occurrence,
        endpoint_id=endpoint_id,
        attempt=notification.error_count + 1,
        attempted_at=at,
        **fields,
    )
