"""Portal sessions: the links a tenant hands one of its customers (an application) to manage
that application's endpoints in the portal page (/portal/).

A session's token (`tkp_…`, tenancy.token_format's shape under a scheme of its own) is
returned once, at creation, and only its lookup prefix and digest are stored. It stops at
its end (`expires_in`, at most 7 days), when it is revoked, or when its application is
deleted. Rows are looked up within the given tenant only: another tenant's application or
session raises `DoesNotExist` exactly like a missing one.
"""

import hmac
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import DEFAULT_DB_ALIAS, models

from dbtools.ratelimit import blocked_for_us, blocked_seconds
from tenancy import token_format
from tenancy.models import Tenant
from tenancy.services import AddressBlocked, FailureLimit, TokenExpired, TokenRejected
from web.errors import InvalidInput
from webhooks.applications import application_get
from webhooks.models import PortalCapability, PortalSession

SCHEME = "tkp_"
EXPIRES_IN_DEFAULT = 3600
EXPIRES_IN_MIN = 60
EXPIRES_IN_MAX = 7 * 86_400
ALL_CAPABILITIES = tuple(PortalCapability.values)


def portal_session_create(
    *,
    tenant: Tenant,
    application: str,
    capabilities: Sequence[str] | None = None,
    expires_in: int | None = None,
    created_by: User | None = None,
    now: datetime,
) -> PortalSession:
    """A session of the tenant's live `application` (its UUID or uid), with `capabilities`
    (None: all; `view` always), ending `expires_in` seconds from `now`. The token is on
    `.plaintext` and the link to the page on `.url` of the returned row only. Raises
    Application.DoesNotExist for an application the tenant has not, InvalidInput for an
    unknown capability or an `expires_in` outside [EXPIRES_IN_MIN, EXPIRES_IN_MAX]."""
    expires_in = EXPIRES_IN_DEFAULT if expires_in is None else expires_in
    if not EXPIRES_IN_MIN <= expires_in <= EXPIRES_IN_MAX:
        raise InvalidInput(
            {"expires_in": [f"Must be from {EXPIRES_IN_MIN} to {EXPIRES_IN_MAX} seconds (7 days)."]}
        )
    granted = _capabilities(capabilities)
    found = application_get(tenant=tenant, key=application)
    plaintext = token_format.mint(SCHEME)
    session = PortalSession.objects.create(
        tenant=tenant,
        application=found,
        capabilities=granted,
        prefix=plaintext[: token_format.LOOKUP_LENGTH],
        digest=token_format.digest(plaintext),
        expires_at=now + timedelta(seconds=expires_in),
        created_by=created_by,
        created_at=now,
    )
    session.plaintext = plaintext
    session.url = settings.PORTAL_URL.replace("{token}", plaintext)
    return session


def portal_session_revoke(*, tenant: Tenant, session_id: uuid.UUID, now: datetime) -> None:
    """End the session at once: its next request is a 401. Revoking a revoked session
    changes nothing; another tenant's or a missing one is PortalSession.DoesNotExist."""
    sessions = PortalSession.objects.filter(pk=session_id, tenant=tenant)
    if not sessions.exists():
        raise PortalSession.DoesNotExist
    sessions.filter(revoked_at__isnull=True).update(revoked_at=now)


def portal_session_authenticate(
    *, plaintext: str, now: datetime, failures: FailureLimit
) -> PortalSession:
    """The live session a presented `tkp_` token is, with its tenant. Raises AddressBlocked
    when the request's address is over its failure limit, TokenExpired for a genuine session
    past its end, TokenRejected for anything else (unknown, revoked, its application
    deleted) without saying which."""
    prefix = token_format.lookup_prefix(plaintext, SCHEME)
    if prefix is None:
        raise TokenRejected("The token is not valid.")
    # On the primary, as an API token is read: a session revoked a moment ago is revoked.
    session = (
        PortalSession.objects.using(DEFAULT_DB_ALIAS)
        .select_related("tenant", "application")
        .filter(prefix=prefix)
        .annotate(
            address_blocked_for_us=blocked_for_us(
                models.Value(failures.key), models.Value(failures.limit)
            )
        )
        .first()
    )
    if session is None:
        seconds = blocked_seconds(failures.key, failures.limit)
        if seconds is not None:
            raise AddressBlocked(seconds)
        raise TokenRejected("The token is not valid.")
    if session.address_blocked_for_us is not None:
        raise AddressBlocked(session.address_blocked_for_us / 1_000_000)
    if not hmac.compare_digest(session.digest, token_format.digest(plaintext)):
        raise TokenRejected("The token is not valid.")
    if session.revoked_at is not None or session.application.deleted_at is not None:
        raise TokenRejected("The token was revoked.")
    if session.expires_at <= now:
        raise TokenExpired("This portal link has expired: ask for a new one.")
    return session


def _capabilities(asked: Sequence[str] | None) -> list[str]:
    if asked is None:
        return list(ALL_CAPABILITIES)
    unknown = sorted(set(asked) - set(ALL_CAPABILITIES))
    if unknown:
        known = ", ".join(ALL_CAPABILITIES)
        message = f"Unknown: {', '.join(unknown)}; known: {known}."
        raise InvalidInput({"capabilities": [message]})
    granted = {PortalCapability.VIEW.value, *asked}
    return [capability for capability in ALL_CAPABILITIES if capability in granted]
