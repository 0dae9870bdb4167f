"""What signups and invitations share: the one answer for a token that does not work, and
the tenant that holds the emails carrying their tokens.

Those emails are one-shot notifications like every email the product sends, so run_tick
delivers them with its pacing, retries and delivery log. Their stored bodies hold a link
reference, not the token (tenancy.link_tokens), and they are kept in a tenant of their own
that nobody is a member of, away from the inviting tenant's `GET /v1/notifications`. A
signup has no tenant yet anyway.
"""

import uuid

from tenancy.models import Tenant
from web.errors import DomainError

ACCOUNT_MAIL_TENANT_ID = uuid.UUID("00000000-0000-4000-8000-00000000a11c")
ACCOUNT_MAIL_TENANT_NAME = "Tickwork account emails (system)"


class InvalidToken(DomainError):
    """Used, revoked, expired or unknown: one answer, so a caller learns nothing of which."""

    kind = "invalid-token"
    title = "Invalid or expired token"

    def __init__(self) -> None:
        super().__init__("The token is invalid, expired or already used.")


def account_mail_tenant() -> Tenant:
    """The tenant (made on first use) whose notifications carry signup and invitation
    links; it has no members, so no API caller can read them."""
    tenant, _ = Tenant.objects.get_or_create(
        id=ACCOUNT_MAIL_TENANT_ID, defaults={"name": ACCOUNT_MAIL_TENANT_NAME}
    )
    return tenant
