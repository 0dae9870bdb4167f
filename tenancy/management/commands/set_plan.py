"""manage.py set_plan TENANT PLAN"""

import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tenancy.models import Tenant
from tenancy.plans import PlanNotFound, tenant_set_plan


def _tenant(reference: str) -> Tenant:
    """The tenant `reference` names: its id, or its name when exactly one tenant has it."""
    try:
        tenant = Tenant.objects.filter(pk=uuid.UUID(reference)).first()
    except ValueError:
        tenant = None
    if tenant is not None:
        return tenant
    named = list(Tenant.objects.filter(name=reference)[:2])
    if len(named) > 1:
        raise CommandError(f"Several tenants are named {reference!r}: give the tenant's id.")
    if not named:
        raise CommandError(f"No tenant has the id or name {reference!r}.")
    return named[0]


class Command(BaseCommand):
    help = "Put a tenant on a plan (its limits apply at once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", help="The tenant's UUID, or its name.")
        parser.add_argument("plan", help="The plan's name.")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = _tenant(options["tenant"].strip())
        try:
            plan = tenant_set_plan(tenant=tenant, plan_name=options["plan"].strip())
        except PlanNotFound:
            raise CommandError(f"No plan is named {options['plan']!r}.") from None
        self.stdout.write(f"{tenant.name} ({tenant.id}) is now on the plan {plan.name}.")
