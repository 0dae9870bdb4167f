"""What a claimed row's write-back is made of: the fenced statement it takes (Branch), where
the tick summary counts it (Bucket), the plan itself (RowPlan, immutable once built), the
retry policy, and the delivery-log rows plans carry. No database access."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from notifications.circuits import Signal
from notifications.models import Delivery, Notification
from notifications.recurrence import CpuBudget


class Branch(StrEnum):
    COMPLETE = "complete"
    ADVANCE = "advance"
    BACKOFF = "backoff"
    DEFER = "defer"
    RELEASE = "release"
    DEAD_LETTER = "dead_letter"


class Bucket(StrEnum):
    """Where a claimed row is counted in the tick summary (exactly one bucket per row)."""

    DELIVERED = "delivered"
    PARTIAL = "partial"
    FAILED = "failed"
    DEFERRED = "deferred"
    RELEASED = "released"
    DEAD_LETTERED = "dead_lettered"


@dataclass(frozen=True)
class RowPlan:
    """A fenced write-back on (pk, token): update the row with `changes`, its new `state`
    among them (notifications.states decides it). `logs` are written whatever the fence
    says (the calls happened); `skipped`, the record of the occurrences a late recurring
    row jumps over, only if the write-back applies."""

    pk: Any
    token: int
    branch: Branch
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
    """A delivery-log row of the notification's current occurrence."""
    return Delivery(
        notification_id=notification.id,
        tenant_id=notification.tenant_id,
        occurrence=notification.occurrence,
        attempted_at=at,
        **fields,
    )
