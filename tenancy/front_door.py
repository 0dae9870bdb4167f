"""The tenant that holds the emails carrying the front door's link tokens (signups,
invitations, sign-in links).

Those emails are one-shot notifications like every email the product sends, so run_tick
delivers them with its pacing, retries and delivery log. Their stored bodies hold a link
reference, not the token (tenancy.link_tokens), and they are kept in a tenant of their own
that nobody is a member of, away from the inviting tenant's `GET /v1/notifications`. A
signup has no tenant yet anyway.
"""

import uuid

from tenancy.models import Tenant

ACCOUNT_MAIL_TENANT_ID = uuid.UUID("00000000-0000-4000-8000-00000000a11c")
ACCOUNT_MAIL_TENANT_NAME = "Tickwork account emails (system)"


def account_mail_tenant() -> Tenant:
    """The tenant (made on first use) whose notifications carry signup and invitation
    links; it has no members, so no API caller can read them."""
    tenant, _ = Tenant.objects.get_or_create(
        id=ACCOUNT_MAIL_TENANT_ID, defaults={"name": ACCOUNT_MAIL_TENANT_NAME}
    )
    return tenant
