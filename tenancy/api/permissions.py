"""The authorization order, as one permission class that every tenant view uses by default:
token (authentication) → user → selected tenant → membership → role → only then data."""

from typing import Any

from rest_framework import exceptions
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from tenancy.models import Role
from tenancy.services import membership_resolve


def _owner_required(view: Any, method: str) -> bool:
    owner_methods = getattr(view, "owner_methods", ())
    return "*" in owner_methods or method in owner_methods


class IsTenantMember(BasePermission):
    """Allows the request once the caller is a member of the selected tenant with the role
    the view asks for (`owner_methods`: HTTP methods, or "*", reserved to owners).

    Sets `request.tenant` and `request.membership` for the view; views filter every query
    on `request.tenant`.
    """

    def has_permission(self, request: Request, view: Any) -> bool:
        if request.user is None or not request.user.is_authenticated:
            raise exceptions.NotAuthenticated()
        membership = membership_resolve(
            user=request.user,
            tenant_header=request.headers.get("X-Tenant-ID"),
            # Read by the authentication's query (tenancy.services.token_authenticate).
            candidates=getattr(request.auth, "tenant_candidates", None),
            # A token bound to one tenant (POST /v1/tokens `tenant_id`) acts only there.
            bound_tenant_id=getattr(request.auth, "tenant_id", None),
        )
        if _owner_required(view, request.method) and membership.role != Role.OWNER:
            raise exceptions.PermissionDenied("This action is reserved to the tenant's owners.")
        request.membership = membership
        request.tenant = membership.tenant
        return True
