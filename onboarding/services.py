"""The front door's behaviour (README: API overview): signup behind Turnstile, invitations, and the
emails that carry their single-use tokens.

The rows are tenancy's (onboarding.signups, onboarding.invitations); this app sits above the
notifications app, so it can queue each email as a one-shot email notification due now
(run_tick delivers it) in the same transaction as the digest its token is checked against:
a digest is never stored without its email, nor an email sent for a digest that was rolled
back. The stored email holds a link reference where the token goes; the tick derives the
token when it sends the email (tenancy.link_tokens), so no stored body carries one. The
emails are kept in onboarding.front_door's account-mail tenant, away from every API caller.
"""

import uuid
from collections.abc import Iterable
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from delivery.models import Channel, NotificationSource
from notifications.services import notification_create
from onboarding.front_door import account_mail_tenant
from onboarding.invitations import (
    AcceptedInvitation,
    IssuedInvitation,
    invitation_accept,
    invitation_issue,
    invitations_issue_missing,
)
from onboarding.signins import LINK_TTL, signin_link_record
from onboarding.signups import signup_request_record
from onboarding.turnstile import SIGNIN_ACTION, captcha_verify
from tenancy.models import Invitation, Tenant
from webhooks.messages import Publish, messages_publish


def _email(address: str, subject: str, body: str, *, now: datetime) -> None:
    notification_create(
        tenant=account_mail_tenant(),
        channels=[Channel.EMAIL],
        email_to=[address],
        subject=subject,
        body=body,
        source=NotificationSource.SYSTEM,
        now=now,
    )


def signup_captcha_check(*, captcha_token: str, address: str) -> None:
    """The signup's CAPTCHA, checked with Turnstile before anything is recorded."""
    captcha_verify(captcha_token, remote_ip=address if "/" not in address else None)


def signup_request(*, email: str, tenant_name: str, address: str, now: datetime) -> None:
    """Record the signup (its CAPTCHA already checked) and queue its verification email
    (unless the address's pending one went out less than a minute ago). The caller hears the
    same whatever happened here, so nothing tells it whether the address is known."""
    email = email.strip().lower()
    with transaction.atomic():
        reference = signup_request_record(
            email=email, tenant_name=tenant_name, address=address, now=now
        )
        if reference is None:
            return
        link = settings.SIGNUP_VERIFY_URL.replace("{token}", reference)
        hours = settings.SIGNUP_TOKEN_TTL_SECONDS / 3600
        _email(
            email,
            "Confirm your Tickwork signup",
            f'Confirm the creation of the team "{tenant_name}" on Tickwork:\n\n{link}\n\n'
            f"The link works once, for {hours:g} hours. If you did not sign up, ignore this "
            "email.",
            now=now,
        )


def signin_captcha_check(*, captcha_token: str, address: str) -> None:
    """The signin's CAPTCHA (action `signin`), checked before anything is recorded."""
    captcha_verify(
        captcha_token, remote_ip=address if "/" not in address else None, action=SIGNIN_ACTION
    )


def signin_request(*, email: str, address: str, now: datetime) -> None:
    """Email a single-use signin link to the account of `email`, if there is one and the
    address is within its limit. The caller hears the same whatever happened here."""
    with transaction.atomic():
        issued = signin_link_record(email=email, address=address, now=now)
        if issued is None:
            return
        link = settings.SIGNIN_URL.replace("{token}", issued.reference)
        minutes = int(LINK_TTL.total_seconds() // 60)
        _email(
            issued.user.email.lower(),
            "Your Tickwork sign-in link",
            f"Sign in to Tickwork:\n\n{link}\n\nThe link works once, for {minutes} minutes. "
            "If you did not ask to sign in, ignore this email: nobody can sign in without it.",
            now=now,
        )


def _send_invitation(
    issued: IssuedInvitation, tenant: Tenant, *, now: datetime, project_name: str | None = None
) -> None:
    """The email carrying an invitation's accept link: it names the team and, for an
    invitation a project's `invite` list made, that project."""
    invitation = issued.invitation
    inviter = invitation.invited_by.email if invitation.invited_by is not None else "Someone"
    link = settings.INVITATION_ACCEPT_URL.replace("{token}", issued.link)
    project = f' to work on the project "{project_name}"' if project_name else ""
    _email(
        invitation.email,
        f'You are invited to the team "{tenant.name}" on Tickwork',
        f'{inviter} invited you to join the team "{tenant.name}" on Tickwork as '
        f"{invitation.role}{project}. Accept the invitation:\n\n{link}\n\nThe link works "
        f"once, until {invitation.expires_at:%Y-%m-%d %H:%M} UTC.",
        now=now,
    )


@transaction.atomic
def invitation_send(
    *, tenant: Tenant, email: str, role: str, invited_by: User, now: datetime
) -> Invitation:
    """Invite `email` (or re-send the pending invitation with a new token) and queue the
    email carrying its accept link."""
    issued = invitation_issue(tenant=tenant, email=email, role=role, invited_by=invited_by, now=now)
    _send_invitation(issued, tenant, now=now)
    return issued.invitation


def project_invitations_send(
    *,
    tenant_id: uuid.UUID,
    emails: Iterable[str],
    invited_by: User | None,
    project_name: str,
    now: datetime,
) -> list[str]:
    """A project's invite list, inside the provision job's transaction: invitations (role
    member) with their emails, naming the project, for addresses that are neither members
    nor pending; returns the addresses that are members, who get the project's plain
    announcement instead."""
    issued, members = invitations_issue_missing(
        tenant_id=tenant_id, emails=emails, invited_by=invited_by, now=now
    )
    for invitation in issued:
        tenant = invitation.invitation.tenant
        _send_invitation(invitation, tenant, now=now, project_name=project_name)
    return members


@transaction.atomic
def invitation_accept_announced(
    *, token: str, user: User | None, now: datetime
) -> AcceptedInvitation:
    """Accept the invitation (onboarding.invitations.invitation_accept) and, in the same
    transaction, publish `invitation.accepted` and, for a new member, `member.joined` to
    the tenant's subscribed endpoints."""
    accepted = invitation_accept(token=token, user=user, now=now)
    member = {
        "tenant_id": str(accepted.tenant.pk),
        "user_id": accepted.user.pk,
        "email": accepted.user.email,
        "role": accepted.role,
    }
    events = [("invitation.accepted", {**member, "invitation_id": str(accepted.invitation_id)})]
    if accepted.joined:
        events.append(("member.joined", member))
    messages_publish(
        [
            Publish(
                tenant_id=accepted.tenant.pk,
                event_type=event_type,
                payload=data,
                source=NotificationSource.SYSTEM,
            )
            for event_type, data in events
        ],
        now=now,
    )
    return accepted
