"""Which plan a tenant is on, and its limits (README: Plans and quotas).

A tenant's plan is its own (`Tenant.plan`) or, when it has none, the plan `DEFAULT_PLAN`
names; with neither the tenant is unlimited. Plans change rarely and are read on hot paths
(every create, every throttled request), so each process keeps what it read for
`_CACHE_SECONDS`: an operator's change reaches every process within that time (at once in
the process that saved it).
"""

import logging
import time
from dataclasses import dataclass
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.db.models.signals import post_delete, post_save

from tenancy.models import Plan, Tenant

logger = logging.getLogger(__name__)

# Periodic quotas: counted per calendar month (UTC), 429 when reached.
PERIODIC = ("notifications_per_month", "messages_per_month")
# Count limits: the rows the tenant has now, 403 when reached.
COUNTED = ("webhook_endpoints", "members")
OTHER = ("requests_per_minute", "deliveries_per_second", "retention_days")
LIMIT_NAMES = PERIODIC + COUNTED + OTHER

_CACHE_SECONDS = 10.0


@dataclass(frozen=True)
class Limits:
    """A plan's limits (None: unlimited); `plan` is its name, None when there is no plan."""

    plan: str | None = None
    notifications_per_month: int | None = None
    messages_per_month: int | None = None
    webhook_endpoints: int | None = None
    members: int | None = None
    requests_per_minute: int | None = None
    deliveries_per_second: int | None = None
    retention_days: int | None = None

    def of(self, name: str) -> int | None:
        return getattr(self, name)

    @classmethod
    def from_plan(cls, plan: Plan) -> "Limits":
        return cls(plan=plan.name, **{name: getattr(plan, name) for name in LIMIT_NAMES})


UNLIMITED = Limits()

# Keys: a plan's id, or its name for the default plan.
_cache: dict[int | str, tuple[float, Limits]] = {}
_paced: dict[str, tuple[float, bool]] = {}


def forget_plans() -> None:
    """Drop what this process read about plans (an operator changed one)."""
    _cache.clear()
    _paced.clear()


def _cached(key: int | str) -> Limits | None:
    hit = _cache.get(key)
    if hit is None or hit[0] < time.monotonic():
        return None
    return hit[1]


def _remember(key: int | str, limits: Limits) -> Limits:
    _cache[key] = (time.monotonic() + _CACHE_SECONDS, limits)
    return limits


def plan_limits(plan_id: int | None) -> Limits:
    """The limits of the plan `plan_id` (a tenant's `plan_id`; None: the default plan)."""
    if plan_id is None:
        return default_limits()
    limits = _cached(plan_id)
    if limits is not None:
        return limits
    plan = Plan.objects.filter(pk=plan_id).first()
    return _remember(plan_id, UNLIMITED if plan is None else Limits.from_plan(plan))


def default_limits() -> Limits:
    """The limits of the plan DEFAULT_PLAN names; unlimited when it is unset or unknown."""
    name = settings.DEFAULT_PLAN
    if not name:
        return UNLIMITED
    limits = _cached(name)
    if limits is not None:
        return limits
    plan = Plan.objects.filter(name=name).first()
    if plan is None:
        logger.warning("DEFAULT_PLAN names no plan: %r; tenants without a plan are unlimited", name)
        return _remember(name, UNLIMITED)
    return _remember(name, Limits.from_plan(plan))


def any_plan_paces() -> bool:
    """Whether some plan sets `deliveries_per_second` (cached like the plans): the tick
    looks a row's tenant up only when one does."""
    hit = _paced.get("any")
    if hit is not None and hit[0] >= time.monotonic():
        return hit[1]
    paced = Plan.objects.filter(deliveries_per_second__isnull=False).exists()
    _paced["any"] = (time.monotonic() + _CACHE_SECONDS, paced)
    return paced


def tenant_limits(tenant: Tenant) -> Limits:
    return plan_limits(tenant.plan_id)


def tenant_limits_by_id(tenant_id: UUID) -> Limits:
    plan_id = Tenant.objects.filter(pk=tenant_id).values_list("plan_id", flat=True).first()
    return plan_limits(plan_id)


def fresh_tenant_limits(tenant_id: UUID) -> Limits:
    """The tenant's limits read from its plan now, past the cache (which learns them)."""
    plan_id = Tenant.objects.filter(pk=tenant_id).values_list("plan_id", flat=True).first()
    if plan_id is None:
        _cache.pop(settings.DEFAULT_PLAN, None)
        return default_limits()
    _cache.pop(plan_id, None)
    return plan_limits(plan_id)


def default_plan() -> Plan | None:
    """The plan DEFAULT_PLAN names, for a new tenant (None: unset or unknown)."""
    name = settings.DEFAULT_PLAN
    return Plan.objects.filter(name=name).first() if name else None


def retention_groups() -> list[tuple[int, Q]]:
    """For each plan that sets `retention_days`: those days, and the condition on a row's
    `tenant` that picks its tenants (those on it, and those without a plan when it is the
    default plan)."""
    default = default_plan()
    groups = []
    for plan in Plan.objects.filter(retention_days__isnull=False):
        tenants = Q(tenant__plan=plan)
        if default is not None and default.pk == plan.pk:
            tenants |= Q(tenant__plan__isnull=True)
        assert plan.retention_days is not None  # the filter's
        groups.append((plan.retention_days, tenants))
    return groups


class PlanNotFound(Exception):
    pass


@transaction.atomic
def tenant_set_plan(*, tenant: Tenant, plan_name: str) -> Plan:
    """Put `tenant` on the plan named `plan_name`; raises PlanNotFound."""
    plan = Plan.objects.filter(name=plan_name).first()
    if plan is None:
        raise PlanNotFound(plan_name)
    Tenant.objects.filter(pk=tenant.pk).update(plan=plan)
    tenant.plan = plan
    return plan


def _plan_changed(**_: object) -> None:
    forget_plans()


post_save.connect(_plan_changed, sender=Plan, dispatch_uid="tenancy.plans.saved")
post_delete.connect(_plan_changed, sender=Plan, dispatch_uid="tenancy.plans.deleted")
