"""Paced rows: a row whose webhook endpoint has a `rate_limit`, or whose tenant's plan sets
`deliveries_per_second`, goes only on a send slot of that pacing budget, which every tick
process shares in the database (`dbqueue.pacing`: no slot is handed out twice).

A row that cannot go now reserves the slot it will get (the next free one of each of its
budgets, one statement each) and waits here for it, while its lease covers the wait (at
most `window`). A row whose slot would come later than that takes none and goes back
unattempted: other ticks hold every slot until then. The claims take no more of a paced
endpoint's rows than its slots free within the window (`limits`) and leave it alone until
half of them are free again, so its rows are claimed in batches, each row about once,
about when its slot comes; what a tick has seen of a budget it remembers for the next
ticks of its process, which then leave a budget other processes hold alone too.

Before, every row over the rate was deferred to the same next free slot, came back with
all the others and was deferred again: a claim and a delivery-log row per waiting row and
slot, and the receiver got a fraction of its rate. On a clock that never moves (a test's
fixed `now`) nothing can wait for a later slot: a row over the rate is deferred, unattempted,
to the next free one, as then.
"""

import heapq
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from dbqueue import pacing
from delivery.models import Notification, WebhookEndpoint
from delivery.scheduler.deliver import DeferralReason
from delivery.scheduler.gate import ClaimLimits
from delivery.scheduler.mail import PLAN_PAUSE_SECONDS, TenantPace

# What the ticks of this process have seen of the budgets: each one's next free slot (at
# the least) and rate, and the endpoint of each endpoint's budget, so a tick leaves an
# endpoint whose slots other processes hold alone before it has loaded it. Entries are
# dropped once they are in the past, when there are many.
_SEEN: dict[str, tuple[datetime, float]] = {}
_ENDPOINT_BUDGETS: dict[Any, str] = {}
_SEEN_MOST = 4096


@dataclass(frozen=True)
class Budget:
    """A pacing budget a row takes a slot of: `name` in dbqueue.pacing, `rate` slots per
    second; `whole_row` when it paces all of the row's channels (a plan), not its webhook
    alone (an endpoint)."""

    name: str
    rate: float
    reason: DeferralReason
    whole_row: bool

    @property
    def interval(self) -> timedelta:
        return timedelta(seconds=1 / self.rate)


@dataclass(frozen=True)
class Wait:
    """A paced row cannot go yet: `until` its slot (None: no slot within its reach, it
    goes back), why, and whether that paces its whole row (else its webhook alone)."""

    until: datetime | None
    reason: DeferralReason
    whole_row: bool


class PacedRows:
    """The pacing slots of one tick's row lane: the rows waiting here for theirs, and what
    the tick knows of each budget."""

    def __init__(
        self,
        *,
        window: float,
        pace: TenantPace,
        endpoints: Mapping[Any, WebhookEndpoint],
    ) -> None:
        """`window`: the longest a row may wait here for its slot; `endpoints`: those the
        lane knows (their rate limits and tenants)."""
        self.window = timedelta(seconds=window)
        self.pace = pace
        self.endpoints = endpoints
        # Rows waiting here for their slot: (slot, arrival order, row).
        self.held: list[tuple[datetime, int, Notification]] = []
        self._arrival = itertools.count()
        # Claims (row id, claim token) that hold every slot they need: they go when started.
        self.slotted: set[tuple[Any, int]] = set()
        # Endpoints the last claim left alone for want of free slots.
        self.full: set[Any] = set()

    def paces(self, row: Notification, endpoint: WebhookEndpoint | None) -> bool:
        """Whether the row's delivery takes a pacing slot at all (its plan's, or the
        endpoint's its webhook goes to)."""
        if endpoint is not None and endpoint.rate_limit is not None:
            return True
        return self.pace.rate(row.tenant_id) is not None

    def wait(
        self,
        row: Notification,
        endpoint: WebhookEndpoint | None,
        *,
        now: datetime,
        latest: datetime | None,
    ) -> Wait | None:
        """None when the row may go now (on the slots it holds, or it needs none), else
        until when it waits for them: every slot it needs is reserved, if it comes by
        `latest` (None: the clock never moves, nothing waits for a slot)."""
        claim = (row.pk, row.claim_token)
        if claim in self.slotted:
            return None
        plan_rate = self.pace.rate(row.tenant_id)
        if plan_rate == 0:
            return Wait(
                until=now + timedelta(seconds=PLAN_PAUSE_SECONDS),
                reason=DeferralReason.PLAN_RATE,
                whole_row=True,
            )
        budgets = self._budgets(row.tenant_id, endpoint, plan_rate=plan_rate)
        if not budgets:
            return None
        if latest is None:
            wait = self._next_free(budgets, now=now)
            if wait is None:
                self.slotted.add(claim)
            return wait
        until = now
        for budget in budgets:
            slot = pacing.reserve_slot_by(budget.name, rate=budget.rate, now=now, latest=latest)
            if slot is None:
                # Other ticks hold every slot within reach: at least until then.
                _seen(budget, latest, now=now, endpoint=endpoint)
                return Wait(until=None, reason=budget.reason, whole_row=budget.whole_row)
            _seen(budget, slot + budget.interval, now=now, endpoint=endpoint)
            until = max(until, slot)
        self.slotted.add(claim)
        if until <= now:
            return None
        return Wait(until=until, reason=budgets[-1].reason, whole_row=budgets[0].whole_row)

    def hold(self, row: Notification, until: datetime) -> None:
        heapq.heappush(self.held, (until, next(self._arrival), row))

    def due(self, *, now: datetime) -> list[Notification]:
        """The held rows whose slot has come, taken out."""
        rows = []
        while self.held and self.held[0][0] <= now:
            rows.append(heapq.heappop(self.held)[2])
        return rows

    def give_up(self) -> list[Notification]:
        """Every held row, taken out (the tick stops): they go back unattempted."""
        rows = [row for _, _, row in self.held]
        self.held.clear()
        return rows

    def pause(self, *, now: datetime) -> float | None:
        """Seconds until the next held row's slot (None when none is held)."""
        if not self.held:
            return None
        return max(0.0, (self.held[0][0] - now).total_seconds())

    def limits(self, limits: ClaimLimits, *, share: int, now: datetime) -> ClaimLimits:
        """`limits` with the paced endpoints the tick knows capped at their slots free
        within the window, and left alone while fewer than half of them are."""
        self.full = set()
        if not _SEEN:
            # No budget seen yet: no endpoint has a room of its own (`room` is None for
            # each), and a wide fan-out knows thousands of them.
            return limits
        skip, caps = set(limits.skip), dict(limits.caps)
        for endpoint_id in self.endpoints.keys() | _ENDPOINT_BUDGETS.keys():
            if endpoint_id in skip:
                continue
            room = self.room(endpoint_id, now=now)
            if room is None:
                continue
            if room == 0:
                skip.add(endpoint_id)
                caps.pop(endpoint_id, None)
                self.full.add(endpoint_id)
            else:
                caps[endpoint_id] = min(caps.get(endpoint_id, share), room)
        return ClaimLimits(skip=frozenset(skip), caps=caps, extra=limits.extra)

    def wants_more(self, endpoint_id: Any, *, now: datetime) -> bool:
        """Whether the endpoint's pacing leaves room for a claim of its rows."""
        return self.room(endpoint_id, now=now) != 0

    def reopened(self, *, now: datetime) -> bool:
        """Whether an endpoint the last claim left alone has room again."""
        return any(self.room(endpoint_id, now=now) != 0 for endpoint_id in self.full)

    def room(self, endpoint_id: Any, *, now: datetime) -> int | None:
        """How many of the endpoint's rows a claim may take for its pacing budgets (the
        fewest over them): their slots free within the window, or 0 while fewer than half
        of them are; None when it is not paced, or no budget of it was seen yet."""
        endpoint = self.endpoints.get(endpoint_id)
        if endpoint is not None:
            names = [budget.name for budget in self._budgets(endpoint.tenant_id, endpoint)]
        else:
            names = [name] if (name := _ENDPOINT_BUDGETS.get(endpoint_id)) else []
        rooms = [room for name in names if (room := self._budget_room(name, now=now)) is not None]
        return min(rooms, default=None)

    def _budget_room(self, name: str, *, now: datetime) -> int | None:
        seen = _SEEN.get(name)
        if seen is None:
            return None
        free, rate = seen
        interval = timedelta(seconds=1 / rate)
        horizon = now + self.window
        start = max(free, now)
        if start > horizon:
            return 0
        room = int((horizon - start) / interval) + 1
        whole = int(self.window / interval) + 1
        return room if room * 2 >= whole else 0

    def _budgets(
        self, tenant_id: Any, endpoint: WebhookEndpoint | None, *, plan_rate: int | None = None
    ) -> list[Budget]:
        """The row's budgets, its plan's first (it paces the whole row)."""
        budgets = []
        plan_rate = plan_rate if plan_rate is not None else self.pace.rate(tenant_id)
        if plan_rate:
            budgets.append(
                Budget(f"plan:{tenant_id}", plan_rate, DeferralReason.PLAN_RATE, whole_row=True)
            )
        if endpoint is not None and endpoint.rate_limit is not None:
            budgets.append(
                Budget(
                    f"webhook:{endpoint.pk}",
                    endpoint.rate_limit,
                    DeferralReason.ENDPOINT_RATE_LIMIT,
                    whole_row=False,
                )
            )
        return budgets

    def _next_free(self, budgets: list[Budget], *, now: datetime) -> Wait | None:
        """On a clock that never moves: a slot if one is free now, else when the next is
        (nothing reserved for it)."""
        for budget in budgets:
            until = pacing.take_slot(budget.name, rate=budget.rate, now=now)
            if until is not None:
                return Wait(until=until, reason=budget.reason, whole_row=budget.whole_row)
        return None


def forget_budgets() -> None:
    """Drop what this process saw of the pacing budgets (their rows were removed)."""
    _SEEN.clear()
    _ENDPOINT_BUDGETS.clear()


def _seen(
    budget: Budget, free: datetime, *, now: datetime, endpoint: WebhookEndpoint | None
) -> None:
    """Note that the budget's next free slot is `free` at the earliest."""
    if len(_SEEN) >= _SEEN_MOST:
        stale = {name for name, (at, _) in _SEEN.items() if at <= now}
        for name in stale:
            del _SEEN[name]
        for endpoint_id in [e for e, name in _ENDPOINT_BUDGETS.items() if name in stale]:
            del _ENDPOINT_BUDGETS[endpoint_id]
    before = _SEEN.get(budget.name)
    _SEEN[budget.name] = (max(free, before[0]) if before else free, budget.rate)
    if not budget.whole_row and endpoint is not None:
        _ENDPOINT_BUDGETS[endpoint.pk] = budget.name
