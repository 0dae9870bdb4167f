"""The user behind a verified JWT (tenancy.api.oidc): found by the issuer's `sub`, stored the
first time it is seen, or linked to — or created for — the token's email when the identity
provider says it verified it (`email_verified: true`).

A JWT whose subject is new and whose email is missing or unverified authenticates nobody
(401): an unverified address proves nothing, so it may neither claim an existing account nor
create one. A JWT grants no membership: its user reaches a tenant only by being added to it.
"""

from dataclasses import dataclass
from typing import Any, TypeGuard

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import DEFAULT_DB_ALIAS, IntegrityError, models, transaction

from dbtools.fields import max_length
from dbtools.ratelimit import blocked_for_us, blocked_seconds
from tenancy.models import ExternalIdentity
from tenancy.services import AddressBlocked, FailureLimit, TokenRejected, user_get_or_create
from web.fields import validate_email_address

_MAX_SUBJECT = max_length(ExternalIdentity, "subject")


@dataclass(frozen=True)
class JwtCredential:
    """`request.auth` for a JWT: who issued it and for whom (never the token itself)."""

    issuer: str
    subject: str


def jwt_user(*, claims: dict[str, Any], issuer: str, failures: FailureLimit) -> User:
    """The active user the verified `claims` name. Raises AddressBlocked when the request's
    address is over its failure limit, TokenRejected when the claims name nobody usable."""
    subject = claims["sub"]
    if not isinstance(subject, str) or not 0 < len(subject) <= _MAX_SUBJECT:
        raise TokenRejected("The token's subject is not usable.")
    # On the primary, as a token is looked up: the failure counts are kept there only.
    known = (
        ExternalIdentity.objects.using(DEFAULT_DB_ALIAS)
        .select_related("user")
        .filter(issuer=issuer, subject=subject)
        .annotate(
            address_blocked_for_us=blocked_for_us(
                models.Value(failures.key), models.Value(failures.limit)
            )
        )
        .first()
    )
    if known is not None and known.address_blocked_for_us is not None:
        raise AddressBlocked(known.address_blocked_for_us / 1_000_000)
    identity: ExternalIdentity
    if known is None:
        seconds = blocked_seconds(failures.key, failures.limit)
        if seconds is not None:
            raise AddressBlocked(seconds)
        identity = _first_sight(issuer, subject, claims)
    else:
        identity = known
    if not identity.user.is_active:
        raise TokenRejected("The token's user is not active.")
    return identity.user


def _usable_address(email: Any) -> TypeGuard[str]:
    if not isinstance(email, str):
        return False
    try:
        validate_email_address(email)
    except ValidationError:
        return False
    return True


def _first_sight(issuer: str, subject: str, claims: dict[str, Any]) -> ExternalIdentity:
    email = claims.get("email")
    if claims.get("email_verified") is not True or not _usable_address(email):
        raise TokenRejected(
            "The identity provider has not verified this token's email address, and its "
            "subject is not known here."
        )
    try:
        with transaction.atomic():
            user = user_get_or_create(email)
            return ExternalIdentity.objects.create(issuer=issuer, subject=subject, user=user)
    except IntegrityError:
        # A concurrent first request of the same subject (or email) stored it first, on the
        # primary: a replica may not have replayed it yet.
        identities = ExternalIdentity.objects.using(DEFAULT_DB_ALIAS).select_related("user")
        return identities.get(issuer=issuer, subject=subject)
