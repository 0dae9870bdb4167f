"""A tenant's members: list, change a role, remove one (or leave). A tenant always keeps an
owner: its last owner can be neither demoted nor removed.

Every change locks the tenant's owner rows first (in id order, so two changes never wait on
each other crosswise) and decides on what it read under that lock: two owners demoting each
other, or both leaving, at the same moment cannot leave the tenant without one. The caller's
own role is read again under the lock, so an owner demoted a moment ago changes nothing.
On SQLite every write transaction already runs alone (IMMEDIATE).
"""

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import QuerySet
from django.dispatch import Signal

from tenancy.models import Membership, Role, Tenant
from tenancy.quotas import hold_count_limit
from web.errors import Conflict, Forbidden

OWNERS_ONLY = "This action is reserved to the tenant's owners."

# Sent inside the removal's transaction with `membership` (deleted, its fields still set):
# tenancy does not know who listens (the product's member.removed event).
member_removed = Signal()


class LastOwner(Conflict):
    kind = "last-owner"

    def __init__(self) -> None:
        super().__init__("This is the tenant's last owner: make another member an owner first.")


def member_join(*, tenant: Tenant, user: User, role: str, re_role: bool) -> tuple[Membership, bool]:
    """The user's membership of the tenant, and whether it is new (made with `role`). An
    operator's grant (`re_role`) also sets an existing membership's role; an accepted
    invitation leaves it as it is (an owner who accepts a member's invitation stays owner).
    A new member must fit the plan's `members` limit (PlanLimitReached)."""
    if not Membership.objects.filter(tenant=tenant, user=user).exists():
        hold_count_limit(tenant, "members")
    if re_role:
        return Membership.objects.update_or_create(
            tenant=tenant, user=user, defaults={"role": role}
        )
    return Membership.objects.get_or_create(tenant=tenant, user=user, defaults={"role": role})


def members_of(tenant: Tenant) -> QuerySet[Membership]:
    return Membership.objects.filter(tenant=tenant).select_related("user")


def member_removal_allowed(*, actor: Membership, removing_self: bool) -> None:
    """The role check, before any row of the tenant is read: owners remove anyone; a member
    only themself (leave). Raises Forbidden."""
    if actor.role != Role.OWNER and not removing_self:
        raise Forbidden(OWNERS_ONLY)


def _locked_owner_ids(tenant: Tenant) -> list[int]:
    owners = Membership.objects.select_for_update().filter(tenant=tenant, role=Role.OWNER)
    return list(owners.order_by("pk").values_list("user_id", flat=True))


def _target(tenant: Tenant, user_id: int) -> Membership:
    return Membership.objects.select_related("user").get(tenant=tenant, user_id=user_id)


@transaction.atomic
def member_set_role(*, actor: Membership, user_id: int, role: str) -> Membership:
    """Give the member `user_id` of the actor's tenant `role`; the actor is an owner."""
    owner_ids = _locked_owner_ids(actor.tenant)
    if actor.user_id not in owner_ids:
        raise Forbidden(OWNERS_ONLY)
    member = _target(actor.tenant, user_id)
    if member.role == Role.OWNER and role != Role.OWNER and owner_ids == [user_id]:
        raise LastOwner
    if member.role != role:
        member.role = role
        member.save(update_fields=["role"])
    return member


@transaction.atomic
def member_remove(*, actor: Membership, user_id: int) -> None:
    """Remove the member `user_id` from the actor's tenant (the actor themself: leave).
    Nothing else of theirs changes: their tokens keep working for their other tenants."""
    owner_ids = _locked_owner_ids(actor.tenant)
    if user_id != actor.user_id and actor.user_id not in owner_ids:
        raise Forbidden(OWNERS_ONLY)
    member = _target(actor.tenant, user_id)
    if owner_ids == [user_id]:
        raise LastOwner
    member.delete()
    member_removed.send(sender=Membership, membership=member)
