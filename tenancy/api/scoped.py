"""Credentials that are no user: confined to one tenant and to the operations a view opens to
them (a webhooks portal session is one).

The authentication that accepts such a credential decides, before any view runs, whether the
operation is open to it; IsTenantMember then admits it to its tenant without a membership,
and the throttles count it by its own key instead of a user's or an address's. Views read
the tenant as for any caller (`tenant_of`) and must confine their rows to what the
credential reaches.
"""

from dataclasses import dataclass

from tenancy.models import Tenant


@dataclass(frozen=True)
class ScopedCredential:
    """`request.auth` of a scoped caller: the `tenant` it acts in, and the `key` its requests
    are counted under by the per-caller throttle."""

    tenant: Tenant
    key: str
