"""The front door's behaviour (README: API overview): signup behind Turnstile, invitations, and the
emails that carry their single-use tokens.

The rows are tenancy's (onboarding.signups, tenancy.invitations); each email is queued
through the engine's door (delivery.outbox) as a one-shot email notification due now
(run_tick delivers it) in the same transaction as the digest its token is checked against:
a digest is never stored without its email, nor an email sent for a digest that was rolled
back. The stored email holds a link reference where the token goes; the tick derives the
token when it sends the email (tenancy.link_tokens), so no stored body carries one. The
emails are kept in tenancy.front_door's account-mail tenant, away from every API caller.
"""

import uuid
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from delivery import outbox
from delivery.models import NotificationSource
from delivery.outbox import Event, events_publish
from jobs.models import Job
from jobs.registry import Handler
from jobs.services import job_enqueue
from onboarding.signins import LINK_TTL, SIGNIN_JOB, signin_link_record
from onboarding.signups import signup_request_record
from onboarding.turnstile import SIGNIN_ACTION, captcha_verify
from tenancy.front_door import account_mail_tenant
from tenancy.invitations import (
    AcceptedInvitation,
    invitation_accept,
    invitation_email,
    invitation_issue,
)
from tenancy.models import Invitation, Tenant


def _email(address: str, subject: str, body: str, *, now: datetime) -> None:
    outbox.email(
        tenant_id=account_mail_tenant().pk, address=address, subject=subject, body=body, now=now
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
    """Queue the sign-in request of `email` (onboarding.signins: the same job for every
    address, so the request does the same work whether or not it has an account)."""
    job_enqueue(
        tenant=account_mail_tenant(),
        kind=SIGNIN_JOB,
        payload={"email": email.strip().lower(), "requester_address": address},
        now=now,
    )


def signin_link_send(job: Job, *, now: datetime) -> None:
    """The queued sign-in request's link, emailed to the account of its address if there is
    one and the resend spacing allows (onboarding.signins.signin_link_record)."""
    issued = signin_link_record(
        email=job.payload["email"], address=job.payload["requester_address"], now=now
    )
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


def _nothing_to_perform(job: Job) -> None:
    """A sign-in request makes only local writes: `apply` does all of it."""


SIGNIN_HANDLER = Handler(
    perform=_nothing_to_perform,
    apply=signin_link_send,
    # A few local statements, well within the second provisioning's worst case takes, so
    # they do not shrink consume_jobs' claims.
    max_seconds=lambda: 1.0,
)


@transaction.atomic
def invitation_send(
    *, tenant: Tenant, email: str, role: str, invited_by: User, now: datetime
) -> Invitation:
    """Invite `email` (or re-send the pending invitation with a new token) and queue the
    email carrying its accept link."""
    issued = invitation_issue(tenant=tenant, email=email, role=role, invited_by=invited_by, now=now)
    _email(*invitation_email(issued, tenant), now=now)
    return issued.invitation


@transaction.atomic
def invitation_accept_announced(
    *, token: str, user: User | None, now: datetime, bound_tenant_id: uuid.UUID | None = None
) -> AcceptedInvitation:
    """Accept the invitation (tenancy.invitations.invitation_accept; a caller whose token is
    bound to another tenant is refused) and, in the same
    transaction, publish `invitation.accepted` and, for a new member, `member.joined` to
    the tenant's subscribed endpoints."""
    accepted = invitation_accept(token=token, user=user, now=now, bound_tenant_id=bound_tenant_id)
    member = {
        "tenant_id": str(accepted.tenant.pk),
        "user_id": accepted.user.pk,
        "email": accepted.user.email,
        "role": accepted.role,
    }
    events = [("invitation.accepted", {**member, "invitation_id": str(accepted.invitation_id)})]
    if accepted.joined:
        events.append(("member.joined", member))
    events_publish(
        [
            Event(
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
