"""A user's own tokens: list, issue (the secret is returned once), revoke; and the session
tokens signing in hands out, which always expire (SESSION_TTL_SECONDS)."""

import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Q, QuerySet

from tenancy.models import ApiToken, Membership, Tenant, TokenKind
from web.errors import Conflict, Forbidden


class TenantNotYours(Forbidden):
    """A token may be bound only to a tenant its user belongs to, and a bound token may
    make only tokens bound to its own tenant."""


class NotRevocableHere(Conflict):
    kind = "token-not-revocable"

    def __init__(self) -> None:
        super().__init__(
            "This request is authenticated by the identity provider's token, which only the "
            "provider can end: sign out there."
        )


def tokens_of(
    user: User, *, now: datetime | None = None, bound_to: uuid.UUID | None = None
) -> QuerySet[ApiToken]:
    """The user's tokens that are not revoked (expired API tokens included: they show when;
    with `now`, sessions past their end are left out, as they can never be used again). A
    caller whose token is bound to a tenant (`bound_to`) sees its user's tokens bound to
    that tenant only: a bound token never reaches beyond its tenant."""
    tokens = ApiToken.objects.filter(user=user, revoked_at__isnull=True)
    if bound_to is not None:
        tokens = tokens.filter(tenant_id=bound_to)
    if now is not None:
        tokens = tokens.exclude(Q(kind=TokenKind.SESSION) & Q(expires_at__lte=now))
    return tokens


def token_issue(
    *,
    user: User,
    name: str,
    expires_in_days: int | None,
    now: datetime,
    tenant_id: uuid.UUID | None = None,
    caller_tenant_id: uuid.UUID | None = None,
) -> ApiToken:
    """A new API token of `user`, bound to `tenant_id` when given (the user must be a member
    of it); its plaintext is on `.plaintext` of the returned row only. A caller whose own
    token is bound (`caller_tenant_id`) makes tokens bound to that tenant only."""
    if caller_tenant_id is not None:
        if tenant_id is not None and tenant_id != caller_tenant_id:
            raise TenantNotYours("This token is bound to another tenant.")
        tenant_id = caller_tenant_id
    tenant = None
    if tenant_id is not None:
        membership = (
            Membership.objects.select_related("tenant")
            .filter(user=user, tenant_id=tenant_id)
            .first()
        )
        if membership is None:
            raise TenantNotYours("You are not a member of this tenant.")
        tenant = membership.tenant
    expires_at = None if expires_in_days is None else now + timedelta(days=expires_in_days)
    token, plaintext = ApiToken.issue(
        user=user, name=name, expires_at=expires_at, now=now, tenant=tenant
    )
    token.plaintext = plaintext
    return token


def session_issue(
    *, user: User, name: str, now: datetime, default_tenant: Tenant | None = None
) -> ApiToken:
    """A session token of `user` that ends SESSION_TTL_SECONDS from `now`, acting by default
    in `default_tenant` (else the user's only tenant); its plaintext is on `.plaintext` of
    the returned row only."""
    expires_at = now + timedelta(seconds=settings.SESSION_TTL_SECONDS)
    token, plaintext = ApiToken.issue(
        user=user,
        name=name,
        kind=TokenKind.SESSION,
        expires_at=expires_at,
        now=now,
        default_tenant=default_tenant,
    )
    token.plaintext = plaintext
    return token


def token_revoke(
    *, user: User, token_id: int, now: datetime, bound_to: uuid.UUID | None = None
) -> None:
    """Revoke one of `user`'s tokens: its next request is a 401. Another user's token, a
    revoked one, or, for a caller bound to a tenant (`bound_to`), one not bound to it, is
    ApiToken.DoesNotExist (404)."""
    revoked = tokens_of(user, bound_to=bound_to).filter(pk=token_id).update(revoked_at=now)
    if not revoked:
        raise ApiToken.DoesNotExist


def token_revoke_current(*, credential: object, now: datetime) -> None:
    """Sign out: revoke the token the request was authenticated with. A JWT of the identity
    provider is not ours to end (NotRevocableHere)."""
    if not isinstance(credential, ApiToken):
        raise NotRevocableHere
    ApiToken.objects.filter(pk=credential.pk, revoked_at__isnull=True).update(revoked_at=now)


# An ended session is kept this long, so that a client presenting it is told `token-expired`
# (sign in again) rather than a bare 401, then `prune` deletes it.
ENDED_SESSION_RETENTION = timedelta(days=7)


def sessions_ended(*, now: datetime) -> QuerySet[ApiToken]:
    """Session tokens that ended (or were revoked) more than ENDED_SESSION_RETENTION ago:
    what `prune` may delete. API tokens are the user's to revoke and are never candidates."""
    before = now - ENDED_SESSION_RETENTION
    return ApiToken.objects.filter(kind=TokenKind.SESSION).filter(
        Q(expires_at__lt=before) | Q(revoked_at__lt=before)
    )
