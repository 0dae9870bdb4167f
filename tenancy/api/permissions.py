"""The authorization order, as one permission class that every tenant view uses by default:
token (authentication) → user → selected tenant → membership → role → only then data."""

import uuid
from typing import Any, cast

from django.contrib.auth.models import User
from rest_framework import exceptions
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from tenancy.api.scoped import ScopedCredential
from tenancy.models import Membership, Role, Tenant
from tenancy.services import membership_resolve


def _owner_required(view: Any, method: str | None) -> bool:
    owner_methods = getattr(view, "owner_methods", ())
    return "*" in owner_methods or method in owner_methods


class IsTenantMember(BasePermission):
    """Allows the request once the caller is a member of the selected tenant with the role
    the view asks for (`owner_methods`: HTTP methods, or "*", reserved to owners).

    Sets `request.tenant` and `request.membership` for the view; views filter every query
    on `request.tenant`. A scoped credential (tenancy.api.scoped), whose authentication
    already found the operation open to it, is admitted to its own tenant with no
    membership.
    """

    def has_permission(self, request: Request, view: Any) -> bool:
        if isinstance(request.auth, ScopedCredential):
            _admitted(request).tenant = request.auth.tenant
            return True
        if request.user is None or not request.user.is_authenticated:
            raise exceptions.NotAuthenticated()
        membership = membership_resolve(
            user=user_of(request),
            tenant_header=request.headers.get("X-Tenant-ID"),
            # Read by the authentication's query (tenancy.services.token_authenticate).
            candidates=getattr(request.auth, "tenant_candidates", None),
            # A token bound to one tenant (POST /v1/tokens `tenant_id`) acts only there.
            bound_tenant_id=bound_tenant_of(request),
            # Where a request without X-Tenant-ID acts (tenancy.models.ApiToken).
            default_tenant_id=getattr(request.auth, "default_tenant_id", None),
        )
        if _owner_required(view, request.method) and membership.role != Role.OWNER:
            raise exceptions.PermissionDenied("This action is reserved to the tenant's owners.")
        admitted = _admitted(request)
        admitted.membership = membership
        admitted.tenant = membership.tenant
        return True


class _AdmittedRequest(Request):
    """The attributes IsTenantMember sets on a request it lets through. A type only: DRF
    builds every request as a plain Request."""

    tenant: Tenant
    membership: Membership


def _admitted(request: Request) -> _AdmittedRequest:
    return cast(_AdmittedRequest, request)


def tenant_of(request: Request) -> Tenant:
    """The tenant IsTenantMember selected; only for a request that permission let through."""
    return _admitted(request).tenant


def membership_of(request: Request) -> Membership:
    """The caller's membership in `tenant_of(request)`; only for a request IsTenantMember let
    through."""
    return _admitted(request).membership


def user_of(request: Request) -> User:
    """The authenticated user; only for a request a permission that refuses anonymous callers
    (IsTenantMember, IsAuthenticated) let through."""
    return cast(User, request.user)


def bound_tenant_of(request: Request) -> uuid.UUID | None:
    """The tenant the request's token is bound to (None for an unbound token, an identity
    provider's JWT or an anonymous caller): a bound token acts in that tenant only."""
    return getattr(request.auth, "tenant_id", None)
