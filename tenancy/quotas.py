"""Holding a tenant to its plan (README: Plans and quotas).

Periodic quotas (`notifications_per_month`, `messages_per_month`) are counted per calendar
month (UTC) in `SHARDS` counter slots per (tenant, limit, period), never in one row. The
limit is shared out between the slots as their caps (a new period's slot k may hold
`limit // SHARDS`, plus one for the first `limit % SHARDS` slots), and `charge` adds to a
slot chosen at random with one conditional UPDATE (`used + n <= cap`, for the limit the
caps were shared out for). Far from the limit, concurrent creates of one tenant mostly write
different rows, so they do not queue behind each other. Near it, a create whose slot is full
tries the others; an UPDATE waits for a concurrent create that holds the slot and re-reads
it, and a failed one locks nothing. The use can never pass the limit (the caps add up to
it), and a charge is refused only when every slot was full as it was read: exact at the
boundary on any number of processes, without a lock that every create takes. A charge is
part of its caller's transaction, so a create that fails later takes its charge back.

When the plan's limit changes within a period (an upgrade, or a downgrade below what some
slots already hold), the first charge that sees it locks the period's slots, reads the
plan's limit under that lock (a process whose plan cache is older must not share out its
stale limit) and shares out what is left of it over them: each slot's cap becomes its use
plus its part of the rest, so the caps add up to the new limit (or to the use, when it is
already past it).

Count limits (`webhook_endpoints`, `members`) count the tenant's rows under a lock on the
tenant's row: those creates are rare, and the count is exact.
"""

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from django.db import transaction
from django.db.models import Count, F, Sum
from django.utils import timezone

from tenancy.models import Plan, Tenant, UsageCounter
from tenancy.plans import (
    COUNTED,
    LIMIT_NAMES,
    PERIODIC,
    Limits,
    default_limits,
    fresh_tenant_limits,
    tenant_limits_by_id,
)
from web.errors import Exhausted, Forbidden

SHARDS = 8


@dataclass(frozen=True)
class Period:
    """A calendar month in UTC: [start, end)."""

    start: datetime
    end: datetime


def period_of(now: datetime) -> Period:
    start = now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = (start + timedelta(days=32)).replace(day=1)
    return Period(start=start, end=end)


class QuotaExceeded(Exhausted):
    """A periodic quota of the tenant's plan is used up until the period ends."""

    kind = "quota-exceeded"

    def __init__(self, *, name: str, limit: int, used: int, period: Period, now: datetime) -> None:
        seconds = max(1, int((period.end - now).total_seconds() + 0.999))
        super().__init__(
            f"The plan allows {limit} {name.replace('_', ' ')}; {used} are used. "
            f"The quota resets at {period.end.isoformat().replace('+00:00', 'Z')}.",
            retry_after=seconds,
        )
        self.members = {
            "limit": limit,
            "used": used,
            "resets_at": period.end.isoformat().replace("+00:00", "Z"),
        }


class PlanLimitReached(Forbidden):
    """A count limit of the tenant's plan is reached: remove something first, or change plan."""

    kind = "plan-limit"

    def __init__(self, *, name: str, limit: int, used: int) -> None:
        super().__init__(
            f"The plan allows {limit} {name.replace('_', ' ')}; the tenant has {used}."
        )
        self.members = {"limit": limit, "used": used}


def _share(limit: int, shard: int) -> int:
    return limit // SHARDS + (1 if shard < limit % SHARDS else 0)


def _slots(tenant_id: UUID, name: str, period: Period) -> Any:
    return UsageCounter.objects.filter(
        tenant_id=tenant_id, limit_name=name, period_start=period.start
    )


def _open_period(tenant_id: UUID, name: str, period: Period, limit: int | None) -> None:
    UsageCounter.objects.bulk_create(
        [
            UsageCounter(
                tenant_id=tenant_id,
                limit_name=name,
                period_start=period.start,
                shard=k,
                cap=None if limit is None else _share(limit, k),
                planned_limit=limit,
            )
            for k in range(SHARDS)
        ],
        ignore_conflicts=True,
    )


def _add(tenant_id: UUID, name: str, period: Period, shard: int, n: int, limit: int | None) -> bool:
    # Only into a slot whose cap was shared out for the limit the caller read: a caller that
    # read another limit (the plan changed, or its cache has not seen the change yet) adds
    # nothing and goes on to share the slots out again from the plan itself.
    slot = _slots(tenant_id, name, period).filter(shard=shard, planned_limit=limit)
    if limit is not None:
        slot = slot.filter(used__lte=F("cap") - n)
    # An UPDATE that waited for a concurrent charge and then found the slot full keeps the
    # slot locked to the end of its transaction (PostgreSQL locks the newest version before
    # it checks it again). Holding it while it waits for the next slot, in an order of its
    # own, two charges can wait for each other: a failed try is rolled back to let it go.
    try:
        with transaction.atomic():
            if slot.update(used=F("used") + n) != 1:
                raise _SlotFull
    except _SlotFull:
        return False
    return True


class _SlotFull(Exception):
    pass


def _share_out(tenant_id: UUID, name: str, period: Period) -> int | None:
    """Share out what is left of the plan's limit over the period's slots as their caps,
    unless a concurrent charge did it for this limit already; the limit shared out for.

    The limit is read from the plan under the slots' lock, never taken from the caller: two
    processes whose plan caches disagree would otherwise share the slots out in turn, each
    for its own limit, and the older, higher one would widen the caps the newer had set."""
    with transaction.atomic():
        slots = list(_slots(tenant_id, name, period).select_for_update().order_by("shard"))
        limit = fresh_tenant_limits(tenant_id).of(name)
        if all(slot.planned_limit == limit for slot in slots):
            return limit
        left = None if limit is None else max(0, limit - sum(slot.used for slot in slots))
        for slot in slots:
            slot.cap = None if left is None else slot.used + _share(left, slot.shard)
            slot.planned_limit = limit
        UsageCounter.objects.bulk_update(slots, ["cap", "planned_limit"])
        return limit


@transaction.atomic
def charge(
    tenant_id: UUID,
    name: str,
    n: int = 1,
    *,
    now: datetime | None = None,
    limits: Limits | None = None,
) -> None:
    """Count `n` uses of the periodic quota `name` for the tenant in the current period, or
    raise QuotaExceeded (counting nothing) when fewer than `n` are left. Call it in the
    transaction that makes what it counts."""
    if name not in PERIODIC:
        raise ValueError(f"not a periodic quota: {name!r}")
    now = now or timezone.now()
    period = period_of(now)
    limit = (limits or tenant_limits_by_id(tenant_id)).of(name)
    first = random.randrange(SHARDS)
    # Unlimited, every slot takes any use: the one chosen is enough.
    order = [first] if limit is None else _every_slot(first)
    if _add_within(tenant_id, name, period, order, n, limit):
        return
    slots = list(_slots(tenant_id, name, period).values_list("used", "planned_limit"))
    used = sum(slot_used for slot_used, _ in slots)
    opened = len(slots) < SHARDS  # the period's first charge: its slots are missing, not full
    if opened:
        _open_period(tenant_id, name, period, limit)
    if any(planned != limit for _, planned in slots):
        # The plan's limit changed since the caps were shared out, or this caller's limit
        # is not the plan's any more.
        limit = _share_out(tenant_id, name, period)
    elif not opened and limit is not None and used + n > limit:
        raise QuotaExceeded(name=name, limit=limit, used=used, period=period, now=now)
    # The slots were opened or shared out just now, or the first tries ran on a snapshot
    # older than a concurrent share-out and the use read since leaves room: once more.
    if _add_within(tenant_id, name, period, _every_slot(first), n, limit):
        return
    if limit is None:
        # The plan changed again between the share-out and the add: charge by the newest.
        charge(tenant_id, name, n, now=now, limits=fresh_tenant_limits(tenant_id))
        return
    used = usage(tenant_id, name, period)
    if n > 1 and used + n <= limit and _add_spread(tenant_id, name, period, n, limit):
        return
    raise QuotaExceeded(name=name, limit=limit, used=used, period=period, now=now)


def _every_slot(first: int) -> list[int]:
    return [first] + [k for k in range(SHARDS) if k != first]


def _add_within(
    tenant_id: UUID, name: str, period: Period, order: list[int], n: int, limit: int | None
) -> bool:
    return any(_add(tenant_id, name, period, shard, n, limit) for shard in order)


def _add_spread(tenant_id: UUID, name: str, period: Period, n: int, limit: int) -> bool:
    """`n` uses that no one slot has room for, one at a time over the slots in shard order
    (so two such charges never hold slots crosswise); all or none."""
    left = n
    try:
        with transaction.atomic():
            for shard in range(SHARDS):
                while left and _add(tenant_id, name, period, shard, 1, limit):
                    left -= 1
            if left:
                raise _NotEnough
    except _NotEnough:
        return False
    return True


class _NotEnough(Exception):
    pass


def usage(tenant_id: UUID, name: str, period: Period) -> int:
    total = _slots(tenant_id, name, period).aggregate(total=Sum("used"))["total"]
    return total or 0


def _count_of(tenant: Tenant, name: str) -> int:
    if name == "members":
        return tenant.memberships.count()
    # Endpoints live in an app above this one: reached through the reverse relation.
    return tenant.webhook_endpoints.count()


def hold_count_limit(tenant: Tenant, name: str, *, adding: int = 1) -> None:
    """Raise PlanLimitReached when the tenant may not have `adding` more of `name`
    (`webhook_endpoints`, `members`). Locks the tenant's row until the caller's transaction
    ends, so concurrent adds are counted one after the other."""
    if name not in COUNTED:
        raise ValueError(f"not a count limit: {name!r}")
    limit = tenant_limits_by_id(tenant.pk).of(name)
    if limit is None:
        return
    Tenant.objects.select_for_update().filter(pk=tenant.pk).exists()
    used = _count_of(tenant, name)
    if used + adding > limit:
        raise PlanLimitReached(name=name, limit=limit, used=used)


@dataclass(frozen=True)
class Usage:
    plan: str | None
    period: Period
    usage: dict[str, dict[str, int | None]]


def usage_report(tenant: Tenant, *, now: datetime | None = None) -> Usage:
    """Each limit of the tenant's plan with its use this period (None where nothing is
    counted: rates and retention)."""
    limits = tenant_limits_by_id(tenant.pk)
    period = period_of(now or timezone.now())
    rows = (
        UsageCounter.objects.filter(tenant=tenant, period_start=period.start)
        .values("limit_name")
        .annotate(total=Sum("used"))
    )
    used: dict[str, int | None] = {name: 0 for name in PERIODIC}
    used.update({row["limit_name"]: row["total"] for row in rows if row["limit_name"] in used})
    for name in COUNTED:
        used[name] = _count_of(tenant, name)
    return Usage(
        plan=limits.plan,
        period=period,
        usage={name: {"used": used.get(name), "limit": limits.of(name)} for name in LIMIT_NAMES},
    )


NEAR = 0.8


@dataclass(frozen=True)
class LimitUse:
    """One tenant's use of one limit of its plan."""

    tenant_id: UUID
    tenant_name: str
    name: str
    used: int
    limit: int

    @property
    def ratio(self) -> float:
        # A limit of 0 allows nothing: it is reached from the start.
        return self.used / self.limit if self.limit else 1.0


def limit_uses(*, now: datetime) -> list[LimitUse]:
    """Every tenant's use of each countable limit its plan sets, this period: a few grouped
    queries whatever the number of tenants (the operators' view, never a tenant's); one
    when no plan exists."""
    plans = {plan.pk: Limits.from_plan(plan) for plan in Plan.objects.all()}
    if not plans:
        return []
    default = default_limits()
    # Tenants without a plan have none to be near unless the default plan applies.
    planned = (
        Tenant.objects.all()
        if default.plan is not None
        else Tenant.objects.filter(plan__isnull=False)
    )
    tenants = {
        row["id"]: (row["name"], plans.get(row["plan_id"], default))
        for row in planned.values("id", "name", "plan_id")
    }
    used: dict[tuple[UUID, str], int] = {}
    for row in (
        UsageCounter.objects.filter(period_start=period_of(now).start, tenant__in=planned)
        .values("tenant_id", "limit_name")
        .annotate(total=Sum("used"))
        .order_by()
    ):
        used[(row["tenant_id"], row["limit_name"])] = row["total"]
    for name, related in (("members", "memberships"), ("webhook_endpoints", "webhook_endpoints")):
        counts = planned.annotate(count=Count(related)).values_list("pk", "count").order_by()
        used.update({(pk, name): count for pk, count in counts})
    return [
        LimitUse(tenant_id, tenant_name, name, used.get((tenant_id, name), 0), limit)
        for tenant_id, (tenant_name, limits) in tenants.items()
        for name in PERIODIC + COUNTED
        if (limit := limits.of(name)) is not None
    ]


def tenants_near_limits(*, now: datetime, at: float = NEAR) -> list[LimitUse]:
    """The limits tenants use at least `at` of, the fullest first."""
    near = [use for use in limit_uses(now=now) if use.ratio >= at]
    return sorted(near, key=lambda use: (-use.ratio, use.tenant_name, use.name))
