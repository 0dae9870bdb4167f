"""What signups and invitations share: the one answer for a token that does not work, and
the tenant that holds the emails carrying their tokens.

Those emails are one-shot notifications like every email the product sends, so run_tick
delivers them with its pacing, retries and delivery log. They are kept in a tenant of their
own that nobody is a member of: a token in a notification body would otherwise be readable
through the inviting tenant's `GET /v1/notifications`, and an owner who read an invitee's
token could accept it anonymously as that person. A signup has no tenant yet anyway.
"""

import uuid

from tenancy.models import Tenant
from web.errors import DomainError

ACCOUNT_MAIL_TENANT_ID = uuid.UUID("00000000-0000-4000-8000-00000000a11c")
ACCOUNT_MAIL_TENANT_NAME = "Tickwork account emails (system)"


class InvalidToken(DomainError):
    """Used, revoked, expired or unknown: one answer, so a caller learns nothing of which."""

    kind = "invalid_token"

    def __init__(self) -> None:
        super().__init__("The token is invalid, expired or already used.")


def account_mail_tenant() -> Tenant:
    """The tenant (made on first use) whose notifications carry signup and invitation
    tokens; it has no members, so no API caller can read them."""
    tenant, _ = Tenant.objects.get_or_create(
        id=ACCOUNT_MAIL_TENANT_ID, defaults={"name": ACCOUNT_MAIL_TENANT_NAME}
    )
    return tenant
