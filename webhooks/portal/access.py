"""A portal session as a caller of the API: its authentication, the operations open to it
and the rows it reaches.

A view opens an operation to portal sessions by naming it in `portal_capabilities` (HTTP
method → the capability it needs; `view` for reads). Any other operation, in this app or
another, answers 403 `portal-scope`; an open one without its capability, 403
`capability-required`. Both are decided here, before any view runs; IsTenantMember then
admits the session to its tenant (tenancy.api.scoped), and the views confine their rows to
its application (`application_scope`), so another application's object, like the tenant's
own, answers 404.
"""

import uuid
from dataclasses import dataclass

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from dbtools.bookmarks import mark_known_caller, refuse_malformed_routing
from tenancy.api.scoped import ScopedCredential
from tenancy.api.throttling import AuthFailures, too_many_failures
from tenancy.services import AddressBlocked, TokenExpired, TokenRejected
from web.headers import refuse_repeated_headers
from webhooks.models import PortalCapability
from webhooks.portal.sessions import SCHEME, portal_session_authenticate


@dataclass(frozen=True)
class PortalCredential(ScopedCredential):
    """`request.auth` of a portal session (never its token)."""

    session_id: uuid.UUID
    application_id: uuid.UUID
    capabilities: frozenset[str]


class OutsidePortalScope(exceptions.PermissionDenied):
    kind = "portal-scope"
    default_detail = (
        "A portal session works only on its application's webhook endpoints and messages, "
        "and reads event types."
    )


class CapabilityRequired(exceptions.PermissionDenied):
    kind = "capability-required"


class PortalTokenAuthentication(BaseAuthentication):
    """A bearer `tkp_…` token: a portal session. Returns None for any other credential (the
    API token authentication takes it), raises AuthenticationFailed (401) for a bad, revoked
    or expired session, counted against the address like any bad token, and 403 for an
    operation not open to the session; returns (None, PortalCredential): no user."""

    def authenticate(self, request: Request) -> tuple[None, PortalCredential] | None:
        parts = get_authorization_header(request).split()
        if len(parts) != 2 or parts[0].lower() != b"bearer":
            return None
        if not parts[1].startswith(SCHEME.encode()):
            return None
        failures = AuthFailures(request)
        try:
            session = portal_session_authenticate(
                plaintext=parts[1].decode("ascii", "replace"),
                now=timezone.now(),
                failures=failures.counter,
            )
        except AddressBlocked as exc:
            raise too_many_failures(exc.seconds_left) from None
        except TokenRejected as exc:
            raise failures.refuse(str(exc), expired=isinstance(exc, TokenExpired)) from None
        mark_known_caller(request)
        refuse_repeated_headers(request)
        refuse_malformed_routing(request)
        credential = PortalCredential(
            tenant=session.tenant,
            key=f"portal:{session.id}",
            session_id=session.id,
            application_id=session.application_id,
            capabilities=frozenset(session.capabilities),
        )
        _admit(request, credential)
        return None, credential

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


def _admit(request: Request, credential: PortalCredential) -> None:
    view = request.parser_context.get("view")
    if view is not None and request.method not in view.allowed_methods:
        return  # its 405, as for any caller
    needed = getattr(view, "portal_capabilities", {}).get(request.method)
    if needed is None:
        raise OutsidePortalScope
    if needed not in credential.capabilities:
        raise CapabilityRequired(
            f"This portal session lacks the '{needed}' capability this operation needs."
        )


def portal_credential(request: Request) -> PortalCredential | None:
    credential = request.auth
    return credential if isinstance(credential, PortalCredential) else None


def application_scope(request: Request) -> uuid.UUID | None:
    """The application a portal session confines the request to; None for a tenant-wide
    caller (a member's token)."""
    credential = portal_credential(request)
    return None if credential is None else credential.application_id


def may(request: Request, capability: PortalCapability) -> bool:
    """Whether the caller holds `capability`: a tenant-wide caller (past its role check)
    holds every one."""
    credential = portal_credential(request)
    return credential is None or capability in credential.capabilities
