"""Signup requests: recorded with the digest of a single-use link token (tenancy.link_tokens),
verified once into a tenant, its owner and a session token (README: API overview). Emailing the link
is the onboarding app's part."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction

from tenancy import link_tokens
from tenancy.link_tokens import InvalidToken
from tenancy.models import SignupRequest, token_digest
from tenancy.services import Grant, tenant_create

# A repeat signup for a pending address re-sends its email at most this often.
RESEND_INTERVAL = timedelta(minutes=1)


def signup_request_record(
    *, email: str, tenant_name: str, address: str, now: datetime
) -> str | None:
    """Record a signup for `email` and return the link reference its email to `email` carries
    where the token goes (tenancy.link_tokens), or None when nothing is to be sent: the
    address's pending request was sent less than RESEND_INTERVAL ago (or a concurrent request
    for it is being recorded). A repeat reuses the pending request with a new token, so the
    link of an earlier email stops working."""
    email = email.strip().lower()
    link = link_tokens.issue("signup", recipients=[email], secret=settings.SECRET_KEY)
    fields = {
        "tenant_name": tenant_name,
        "token_digest": link.digest,
        "expires_at": now + timedelta(seconds=settings.SIGNUP_TOKEN_TTL_SECONDS),
        "sent_at": now,
        "requester_address": address,
    }
    with transaction.atomic():
        pending = (
            SignupRequest.objects.select_for_update()
            .filter(email=email, used_at__isnull=True)
            .only("sent_at")
            .first()
        )
        if pending is None:
            try:
                with transaction.atomic():
                    SignupRequest.objects.create(email=email, created_at=now, **fields)
            except IntegrityError:
                return None  # a concurrent signup for this address committed first
            return link.reference
        if pending.sent_at > now - RESEND_INTERVAL:
            return None
        SignupRequest.objects.filter(pk=pending.pk).update(**fields)
        return link.reference


@transaction.atomic
def signup_verify(*, token: str, now: datetime) -> Grant:
    """The tenant, its owner and a session token for a pending request's token, in one
    transaction; InvalidToken for a used, expired or unknown one. The request's row lock
    makes two concurrent verifies of one token one success and one InvalidToken."""
    request = SignupRequest.objects.select_for_update().filter(token_digest=token_digest(token))
    signup = request.first()
    if signup is None or signup.used_at is not None or signup.expires_at <= now:
        raise InvalidToken
    SignupRequest.objects.filter(pk=signup.pk).update(used_at=now)
    return tenant_create(name=signup.tenant_name, owner_email=signup.email, session_at=now)
