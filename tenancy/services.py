"""Token checks, tenant resolution and the operator commands' writes."""

import hashlib
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeAlias, TypedDict, cast

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import models, transaction
from django.db.models import FilteredRelation, Q

from dbtools.compiled import CompiledQuery, Param
from dbtools.fields import max_length
from dbtools.ratelimit import blocked_for_us
from tenancy.members import member_join
from tenancy.models import ApiToken, Membership, Role, Tenant
from tenancy.plans import default_plan
from tenancy.tokens import session_issue
from web.errors import DomainError, Forbidden

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

# Writing last_used_at on every request would turn every read into a write; a minute of
# precision is what an owner needs to spot an unused or a leaked token.
LAST_USED_PRECISION = timedelta(minutes=1)


class TokenRejected(Exception):
    """The presented bearer token is unknown, malformed, expired or revoked."""


class TokenExpired(TokenRejected):
    """The presented token is genuine and was not revoked, but its time is up: the client
    should sign in again (a session) or use another token."""


class AddressBlocked(Exception):
    """The request's address failed authentication too often: no token of it is checked."""

    def __init__(self, seconds_left: float) -> None:
        super().__init__(seconds_left)
        self.seconds_left = seconds_left


@dataclass(frozen=True)
class FailureLimit:
    """The failed-authentication counter (a dbtools.ratelimit key) of the request's address
    and the failures it may count before the address is refused."""

    key: str
    limit: int


_NO_FAILURE_LIMIT = FailureLimit(key="", limit=1)


class TenantNotChosen(DomainError):
    """The request does not say which tenant it acts in (or says it unreadably)."""

    kind = "tenant-selection"


class NotAMember(Forbidden):
    """The caller is not a member of the tenant the request selects."""


@dataclass(frozen=True)
class TenantCandidates:
    """The caller's memberships as read with the token: the one in the tenant `tenant_id`
    names (none if not a member), or up to two of any tenant when `tenant_id` is None."""

    tenant_id: uuid.UUID | None
    memberships: tuple[Membership, ...]


class _TokenReading(TypedDict):
    """What the token's statement reads beside the token, and what token_authenticate leaves
    on it for membership_resolve."""

    address_blocked_for_us: int | None
    selected_tenant: Tenant
    tenant_candidates: TenantCandidates | None


TokenRow: TypeAlias = "WithAnnotations[ApiToken, _TokenReading]"


def token_authenticate(
    *,
    plaintext: str,
    now: datetime,
    tenant_header: str | None = None,
    failures: FailureLimit = _NO_FAILURE_LIMIT,
) -> tuple[User, ApiToken]:
    """The user behind a bearer token; raises TokenRejected without saying which check failed,
    except TokenExpired (a TokenRejected) for a genuine, unrevoked token past its end: only
    its holder can present it, and they need to know to sign in again.

    The statement that reads the token also reads the memberships `membership_resolve` needs
    for `tenant_header` and leaves them on the token as `tenant_candidates`: authentication
    and tenant resolution cost one query together. Nothing is decided on them here. It also
    reads whether the request's address is over its `failures` limit: then AddressBlocked
    is raised before the token is checked.
    """
    try:
        tenant_id, with_memberships = _tenant_id(tenant_header), True
    except TenantNotChosen:  # membership_resolve refuses the header before reading anything
        tenant_id, with_memberships = None, False
    prefix = ApiToken.prefix_of(plaintext)
    rows = [] if prefix is None else _token_rows(prefix, tenant_id, with_memberships, failures)
    token = rows[0] if rows else None
    if token is not None and token.address_blocked_for_us is not None:
        raise AddressBlocked(token.address_blocked_for_us / 1_000_000)
    if token is None or not token.matches(plaintext):
        raise TokenRejected("The token is not valid.")
    if token.revoked_at is not None or not token.user.is_active:
        raise TokenRejected("The token was revoked.")
    if token.has_expired(now=now):
        raise TokenExpired("The token has expired: sign in again, or use another token.")
    _note_use(token, now)
    token.tenant_candidates = None
    if with_memberships:
        token.tenant_candidates = TenantCandidates(
            tenant_id=tenant_id, memberships=_memberships_of(rows)
        )
    return token.user, token


def _note_use(token: ApiToken, now: datetime) -> None:
    """Record the use at most once a minute: no statement while the value read is fresh,
    and a conditional one otherwise, so requests racing past the read write it once."""
    stale_before = now - LAST_USED_PRECISION
    if token.last_used_at is not None and token.last_used_at >= stale_before:
        return
    ApiToken.objects.filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lt=stale_before), pk=token.pk
    ).update(last_used_at=now)
    token.last_used_at = now


def _token_query(condition: Q | None) -> models.QuerySet[ApiToken]:
    """The token with its user; with a `condition` on the user's memberships, once per
    membership it admits (at most two rows), with that membership and its tenant."""
    # No ORDER BY: nothing to sort on the hottest query we have.
    tokens = (
        ApiToken.objects.select_related("user")
        .filter(prefix=Param("prefix", models.CharField()))
        .annotate(
            address_blocked_for_us=blocked_for_us(
                Param("failure_key", models.CharField()),
                Param("failure_limit", models.IntegerField()),
            )
        )
    )
    if condition is None:
        return tokens[:1]
    joined = tokens.annotate(
        selected_membership=FilteredRelation("user__memberships", condition=condition),
        selected_tenant=FilteredRelation("selected_membership__tenant"),
    )
    # The plugin does not see FilteredRelation's names as relations select_related may follow.
    return joined.select_related("selected_membership", "selected_tenant")[:2]  # type: ignore[misc]


# Compiled once per connection: compiling this join cost more than running it.
_TOKEN = CompiledQuery(lambda: _token_query(None))
_TOKEN_IN_ANY_TENANT = CompiledQuery(lambda: _token_query(Q()))
_TOKEN_IN_TENANT = CompiledQuery(
    lambda: _token_query(Q(user__memberships__tenant_id=Param("tenant_id", models.UUIDField())))
)


def _token_rows(
    prefix: str, tenant_id: uuid.UUID | None, with_memberships: bool, failures: FailureLimit
) -> list[TokenRow]:
    values: dict[str, Any] = {
        "prefix": prefix,
        "failure_key": failures.key,
        "failure_limit": failures.limit,
    }
    if not with_memberships:
        query = _TOKEN
    elif tenant_id is None:
        query = _TOKEN_IN_ANY_TENANT
    else:
        query, values["tenant_id"] = _TOKEN_IN_TENANT, tenant_id
    # Rows of _token_query, which reads _TokenReading's columns with the token.
    return cast("list[TokenRow]", query.run(**values))


def _memberships_of(rows: list[TokenRow]) -> tuple[Membership, ...]:
    memberships = []
    for row in rows:
        # select_related leaves the attribute unset on a row that joined no membership.
        membership = getattr(row, "selected_membership", None)
        if membership is not None:
            membership.tenant, membership.user = row.selected_tenant, row.user
            memberships.append(membership)
    return tuple(memberships)


def _tenant_id(tenant_header: str | None) -> uuid.UUID | None:
    if tenant_header is None:
        return None
    try:
        return uuid.UUID(tenant_header.strip())
    except ValueError:
        raise TenantNotChosen("X-Tenant-ID must be a tenant UUID.") from None


def membership_resolve(
    *,
    user: User,
    tenant_header: str | None,
    candidates: TenantCandidates | None = None,
    bound_tenant_id: uuid.UUID | None = None,
    default_tenant_id: uuid.UUID | None = None,
) -> Membership:
    """The caller's membership in the tenant the request selects.

    With `X-Tenant-ID` the tenant is that one (malformed → 400, not a member → 403);
    without it, the token's default tenant (`default_tenant_id`) while the user is a member
    there, else the user's sole membership (none → 403, several → 400). A token bound to a
    tenant (`bound_tenant_id`) selects that tenant, and any other is 403.
    `candidates` read with the token for the same header spare the query.
    """
    tenant_id = _tenant_id(tenant_header)
    if bound_tenant_id is not None:
        if tenant_id is not None and tenant_id != bound_tenant_id:
            raise NotAMember("This token is bound to another tenant.")
        tenant_id = bound_tenant_id
    elif tenant_id is None and default_tenant_id is not None:
        default = _default_membership(user, default_tenant_id, candidates)
        if default is not None:
            return default
    if candidates is not None and candidates.tenant_id == tenant_id:
        found = list(candidates.memberships)
    else:
        memberships = Membership.objects.select_related("tenant").filter(user=user)
        if tenant_id is not None:
            memberships = memberships.filter(tenant_id=tenant_id)
        found = list(memberships[:2])
    if tenant_id is not None:
        if not found:
            raise NotAMember("You are not a member of this tenant.")
        return found[0]
    if not found:
        raise NotAMember("You are not a member of any tenant.")
    if len(found) > 1:
        raise TenantNotChosen(
            "You belong to several tenants: choose one with the X-Tenant-ID header."
        )
    return found[0]


def _default_membership(
    user: User, tenant_id: uuid.UUID, candidates: TenantCandidates | None
) -> Membership | None:
    """The user's membership in their token's default tenant, if they are still a member."""
    if candidates is not None and candidates.tenant_id is None:
        for membership in candidates.memberships:
            if membership.tenant_id == tenant_id:
                return membership
        if len(candidates.memberships) < 2:  # all of the user's memberships were read
            return None
    memberships = Membership.objects.select_related("tenant").filter(user=user)
    return memberships.filter(tenant_id=tenant_id).first()


def _username_for(email: str) -> str:
    """A new user's user name: their address, or a digest of it when the address is longer
    than the column (150; an address may have 254). Users are found by their email, so the
    name only has to be unique, as the address is."""
    limit = max_length(get_user_model(), "username")
    if len(email) <= limit:
        return email
    return "sha256:" + hashlib.sha256(email.encode()).hexdigest()


def user_get_or_create(email: str) -> User:
    user_model = get_user_model()
    user = user_model.objects.filter(email__iexact=email).first()
    if user is None:
        email = email.lower()
        user = user_model.objects.create_user(username=_username_for(email), email=email)
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


@dataclass(frozen=True)
class Grant:
    tenant: Tenant
    user: User
    role: str
    token: str
    # When the token ends: a session's always, an operator's API token never.
    expires_at: datetime | None = None


@transaction.atomic
def tenant_create(*, name: str, owner_email: str, session_at: datetime | None = None) -> Grant:
    """A tenant, its owner (created if needed) and a fresh token for the owner: an API
    token (an operator's command), or a session starting at `session_at` (a signup)."""
    tenant = Tenant.objects.create(name=name, plan=default_plan())
    user = user_get_or_create(owner_email)
    Membership.objects.create(tenant=tenant, user=user, role=Role.OWNER)
    if session_at is not None:
        session = session_issue(user=user, name="signup", now=session_at, default_tenant=tenant)
        return Grant(
            tenant=tenant,
            user=user,
            role=Role.OWNER,
            token=session.plaintext,
            expires_at=session.expires_at,
        )
    _, plaintext = ApiToken.issue(user=user, default_tenant=tenant)
    return Grant(tenant=tenant, user=user, role=Role.OWNER, token=plaintext)


@transaction.atomic
def member_add(*, tenant: Tenant, email: str, role: str) -> Grant:
    """Add (or re-role) a user in a tenant and issue them a token."""
    user = user_get_or_create(email)
    member_join(tenant=tenant, user=user, role=role, re_role=True)
    _, plaintext = ApiToken.issue(user=user, default_tenant=tenant)
    return Grant(tenant=tenant, user=user, role=role, token=plaintext)
