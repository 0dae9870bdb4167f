"""The signed-in user's own account (GET/PATCH /v1/me) and the selected tenant's name
(PATCH /v1/tenant)."""

import uuid
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db.models import QuerySet

from tenancy.models import Membership, Tenant


@dataclass(frozen=True)
class Me:
    user: User
    memberships: QuerySet[Membership]


def me_of(user: User, *, bound_tenant_id: uuid.UUID | None = None) -> Me:
    """The user and their memberships, by tenant name; a token bound to one tenant sees
    only that one."""
    memberships = (
        Membership.objects.filter(user=user)
        .select_related("tenant")
        .order_by("tenant__name", "tenant_id")
    )
    if bound_tenant_id is not None:
        memberships = memberships.filter(tenant_id=bound_tenant_id)
    return Me(user=user, memberships=memberships)


def user_rename(*, user: User, name: str) -> None:
    """Set the name the user goes by (shown to their teams); blank clears it."""
    user.first_name = name
    user.save(update_fields=["first_name"])


def tenant_rename(*, tenant: Tenant, name: str) -> Tenant:
    """Rename the tenant the caller acts in (an owner's call: the view checks the role)."""
    Tenant.objects.filter(pk=tenant.pk).update(name=name)
    tenant.name = name
    return tenant
