"""Plans for the plans and quotas tests."""

from tenancy.models import Plan, Tenant


def put_on_plan(tenant: Tenant, **limits) -> Plan:
    """A plan with `limits` (others unlimited), and `tenant` on it."""
    plan = Plan.objects.create(name=f"plan of {tenant.name}", **limits)
    Tenant.objects.filter(pk=tenant.pk).update(plan=plan)
    tenant.plan = plan
    return plan
