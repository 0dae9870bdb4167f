"""Invitations into a tenant (README: API overview): issued with the digest of a single-use link
token (tenancy.link_tokens), re-issued for an address already pending, revoked, and accepted once
into a membership. Emailing the link is the onboarding app's part, in the same transaction as the
digest its token is checked against.

A token is looked up by its SHA-256 digest: what the database compares is the digest, so
the time a lookup takes says nothing about the token itself.
"""

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet

from tenancy import link_tokens
from tenancy.link_tokens import InvalidToken
from tenancy.members import member_join
from tenancy.models import (
    Invitation,
    InvitationStatus,
    Membership,
    Tenant,
    token_digest,
)
from tenancy.services import user_get_or_create
from tenancy.tokens import TenantNotYours, session_issue
from web.errors import Conflict, Forbidden, InvalidInput


class AlreadyMember(Conflict):
    kind = "already-member"

    def __init__(self) -> None:
        super().__init__("This address already belongs to a member of the tenant.")


class InvitationAccepted(Conflict):
    kind = "invitation-accepted"

    def __init__(self) -> None:
        super().__init__("The invitation was accepted already; it cannot be revoked.")


class NotTheInvitee(Forbidden):
    def __init__(self) -> None:
        super().__init__("This invitation is for another email address.")


@dataclass(frozen=True)
class IssuedInvitation:
    """An invitation and the link reference its email carries where the token goes (the
    token itself is derived when the email is sent: tenancy.link_tokens)."""

    invitation: Invitation
    link: str


@dataclass(frozen=True)
class AcceptedInvitation:
    tenant: Tenant
    user: User
    role: str
    token: str | None
    expires_at: datetime | None = None
    invitation_id: uuid.UUID | None = None
    # False when the invitee was a member already.
    joined: bool = True


def _member_emails(tenant_id: uuid.UUID, emails: Iterable[str]) -> set[str]:
    addresses = {email.lower() for email in emails}
    query = Q()
    for address in addresses:
        query |= Q(user__email__iexact=address)
    members = Membership.objects.filter(query, tenant_id=tenant_id).values_list("user__email")
    return {email.lower() for (email,) in members} & addresses if addresses else set()


@transaction.atomic
def invitation_issue(
    *,
    tenant: Tenant,
    email: str,
    role: str,
    invited_by: User | None,
    now: datetime,
) -> IssuedInvitation:
    """A pending invitation of `email` with a fresh link token for an email to `email`: a
    new one, or the address's pending one re-issued (new token, role and expiry; its old
    token stops working). AlreadyMember when the address is a member."""
    email = email.strip().lower()
    if _member_emails(tenant.id, [email]):
        raise AlreadyMember
    link = link_tokens.issue("invitation", recipients=[email], secret=settings.SECRET_KEY)
    fields = {
        "role": role,
        "invited_by": invited_by,
        "token_digest": link.digest,
        "expires_at": now + timedelta(seconds=settings.INVITATION_TTL_SECONDS),
    }
    pending = Invitation.objects.select_for_update().filter(
        tenant=tenant, email=email, status=InvitationStatus.PENDING
    )
    invitation = pending.first()
    if invitation is None:
        try:
            with transaction.atomic():
                invitation = Invitation.objects.create(
                    tenant=tenant, email=email, created_at=now, **fields
                )
        except IntegrityError:
            invitation = pending.first()  # a concurrent invitation of this address won
            if invitation is None:
                raise
    if invitation.token_digest != link.digest:
        for name, value in fields.items():
            setattr(invitation, name, value)
        invitation.save(update_fields=[*fields])
    return IssuedInvitation(invitation=invitation, link=link.reference)


def invitations_of(tenant: Tenant, *, status: str | None, now: datetime) -> QuerySet[Invitation]:
    """The tenant's invitations, optionally in one status (`expired`: pending rows past
    their expiry; `pending`: the others)."""
    invitations = Invitation.objects.filter(tenant=tenant).select_related("invited_by")
    if status is None:
        return invitations
    if status not in InvitationStatus.values:
        raise InvalidInput({"status": [f"Must be one of {InvitationStatus.values}."]})
    if status == InvitationStatus.PENDING:
        return invitations.filter(status=status, expires_at__gt=now)
    if status == InvitationStatus.EXPIRED:
        return invitations.filter(
            Q(status=status) | Q(status=InvitationStatus.PENDING, expires_at__lte=now)
        )
    return invitations.filter(status=status)


@transaction.atomic
def invitation_revoke(*, tenant: Tenant, invitation_id: uuid.UUID) -> None:
    """Revoke a pending (or expired) invitation: its token stops working at once. An
    accepted one is InvitationAccepted. A revoked one raises DoesNotExist, like another
    tenant's or a missing one: a second DELETE is 404, as for a token."""
    invitation = Invitation.objects.select_for_update().get(pk=invitation_id, tenant=tenant)
    if invitation.status == InvitationStatus.ACCEPTED:
        raise InvitationAccepted
    if invitation.status == InvitationStatus.REVOKED:
        raise Invitation.DoesNotExist
    invitation.status = InvitationStatus.REVOKED
    invitation.save(update_fields=["status"])


def invitation_preview(*, token: str, now: datetime) -> Invitation:
    """The pending invitation a token opens, with its tenant and inviter, left as it is;
    InvalidToken for exactly the tokens accept refuses (used, revoked, expired, unknown)."""
    invitation = (
        Invitation.objects.select_related("tenant", "invited_by")
        .filter(token_digest=token_digest(token))
        .first()
    )
    if invitation is None or invitation.status_at(now) != InvitationStatus.PENDING:
        raise InvalidToken
    return invitation


@transaction.atomic
def invitation_accept(
    *, token: str, user: User | None, now: datetime, bound_tenant_id: uuid.UUID | None = None
) -> AcceptedInvitation:
    """The membership a pending invitation's token grants, and its user (created when
    needed), in one transaction. `user` is the authenticated caller, who must be the
    invitee (NotTheInvitee), through a token bound to no tenant or to the invitation's
    (`bound_tenant_id`; another is TenantNotYours, the invitation left pending); an
    anonymous caller gets a session token of the invitee (SESSION_TTL_SECONDS), shown once.
    Used, revoked, expired or unknown: InvalidToken.
    The invitation's row lock makes two concurrent accepts of one token one membership
    and one InvalidToken."""
    invitation = (
        Invitation.objects.select_for_update(of=("self",))
        .select_related("tenant")
        .filter(token_digest=token_digest(token))
        .first()
    )
    if invitation is None or invitation.status_at(now) != InvitationStatus.PENDING:
        raise InvalidToken
    if user is not None and (user.email or "").lower() != invitation.email:
        raise NotTheInvitee
    if bound_tenant_id is not None and bound_tenant_id != invitation.tenant_id:
        raise TenantNotYours("This token is bound to another tenant.")
    Invitation.objects.filter(pk=invitation.pk).update(
        status=InvitationStatus.ACCEPTED, accepted_at=now
    )
    invitee = user or user_get_or_create(invitation.email)
    membership, joined = member_join(
        tenant=invitation.tenant, user=invitee, role=invitation.role, re_role=False
    )
    session = None
    if user is None:
        session = session_issue(
            user=invitee, name="invitation", now=now, default_tenant=invitation.tenant
        )
    return AcceptedInvitation(
        tenant=invitation.tenant,
        user=invitee,
        role=membership.role,
        token=None if session is None else session.plaintext,
        expires_at=None if session is None else session.expires_at,
        invitation_id=invitation.pk,
        joined=joined,
    )


def invitations_issue_missing(
    *,
    tenant_id: uuid.UUID,
    emails: Iterable[str],
    invited_by: User | None,
    now: datetime,
) -> tuple[list[IssuedInvitation], list[str]]:
    """For a project's invite list: an invitation (role member) for each address that is
    neither a member nor already pending, and the addresses that are members. An address
    with a pending invitation keeps it untouched, so running this twice issues nothing new.
    When every address is a member, that is the one statement."""
    emails = list(emails)
    members = _member_emails(tenant_id, emails)
    others = [email for email in emails if email.lower() not in members]
    if not others:
        return [], emails
    pending = set(
        Invitation.objects.filter(
            tenant_id=tenant_id,
            email__in=[email.lower() for email in others],
            status=InvitationStatus.PENDING,
            expires_at__gt=now,
        ).values_list("email", flat=True)
    )
    tenant = Tenant.objects.get(pk=tenant_id)
    issued = [
        invitation_issue(tenant=tenant, email=email, role="member", invited_by=invited_by, now=now)
        for email in others
        if email.lower() not in pending
    ]
    return issued, [email for email in emails if email.lower() in members]


def invitation_email(
    issued: IssuedInvitation, tenant: Tenant, *, project_name: str | None = None
) -> tuple[str, str, str]:
    """(address, subject, body) of the e-mail carrying an invitation's accept link: it
    names the team and, for an invitation a project's `invite` list made, that project."""
    invitation = issued.invitation
    inviter = invitation.invited_by.email if invitation.invited_by is not None else "Someone"
    link = settings.INVITATION_ACCEPT_URL.replace("{token}", issued.link)
    project = f' to work on the project "{project_name}"' if project_name else ""
    return (
        invitation.email,
        f'You are invited to the team "{tenant.name}" on Tickwork',
        f'{inviter} invited you to join the team "{tenant.name}" on Tickwork as '
        f"{invitation.role}{project}. Accept the invitation:\n\n{link}\n\nThe link works "
        f"once, until {invitation.expires_at:%Y-%m-%d %H:%M} UTC.",
    )
