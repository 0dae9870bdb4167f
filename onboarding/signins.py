"""Signing back in (README: Signing in and sessions): a single-use link of an existing user,
recorded as the digest of its token (tenancy.link_tokens, purpose `signin`) and valid for 15
minutes, and its verification into a session token. Emailing the link is the onboarding app's
part.

Nothing may tell a caller whether an address has an account: a request only queues a job
(SIGNIN_JOB, the same row whatever the address), so the request does the same work and
writes the same for every address; `consume_jobs` decides, later and out of the caller's
sight, whether there is an account to send a link to.

Links never end each other, so no stranger can take away a link its user holds. A new link is
sent unless the user's newest one is unused, still good and younger than the resend spacing,
which grows with the links sent in the last day (`resend_spacing`) and stays shorter than a
link's life: a request that sends nothing leaves the user a link good for at least
LINK_TTL - MAX_SPACING. Mail-bombing an address yields at most one email per MAX_SPACING once
the day's first few are out.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import QuerySet

from tenancy import link_tokens
from tenancy.link_tokens import InvalidToken
from tenancy.models import ApiToken, SigninLink, token_digest
from tenancy.tokens import session_issue

SIGNIN_JOB = "signin-link"
LINK_TTL = timedelta(minutes=15)
# The spacing after the day's first link; it doubles with each link sent since, up to
# MAX_SPACING, which leaves the newest link 5 minutes of its life when a request is held.
FIRST_SPACING = timedelta(minutes=1)
MAX_SPACING = timedelta(minutes=10)
SPACING_MEMORY = timedelta(days=1)


@dataclass(frozen=True)
class IssuedSignin:
    """Whom the link is for and the reference its email carries where the token goes."""

    user: User
    reference: str


@dataclass(frozen=True)
class SignedIn:
    user: User
    session: ApiToken


def resend_spacing(links_sent_in_the_last_day: int) -> timedelta:
    """How long after the user's newest link (unused) a request sends nothing new."""
    if links_sent_in_the_last_day <= 0:
        return timedelta(0)
    doublings = min(links_sent_in_the_last_day - 1, 10)  # 2**10 minutes are past the cap
    return min(FIRST_SPACING * 2**doublings, MAX_SPACING)


def signin_link_record(*, email: str, address: str, now: datetime) -> IssuedSignin | None:
    """A new signin link for the active user of `email`, or None when there is none or the
    user's newest link is unused, good and younger than the resend spacing. Earlier links
    stay good until used or past their end."""
    email = email.strip().lower()
    user = get_user_model().objects.filter(email__iexact=email, is_active=True).first()
    if user is None:
        return None
    with transaction.atomic():
        # One sender at a time per user, so two queued requests cannot both pass the spacing.
        get_user_model().objects.select_for_update().filter(pk=user.pk).exists()
        recent = list(
            SigninLink.objects.filter(user=user, created_at__gt=now - SPACING_MEMORY)
            .order_by("-created_at")
            .values_list("created_at", "used_at", "expires_at")
        )
        if recent:
            created_at, used_at, expires_at = recent[0]
            held = used_at is None and expires_at > now
            if held and now - created_at < resend_spacing(len(recent)):
                return None
        link = link_tokens.issue(
            "signin", recipients=[user.email.lower()], secret=settings.SECRET_KEY
        )
        SigninLink.objects.create(
            user=user,
            token_digest=link.digest,
            expires_at=now + LINK_TTL,
            requester_address=address,
            created_at=now,
        )
    return IssuedSignin(user=user, reference=link.reference)


@transaction.atomic
def signin_verify(*, token: str, now: datetime) -> SignedIn:
    """A session token for the user of an unused, unexpired link, which is used up;
    InvalidToken for a used, expired or unknown one. The link's row lock makes two
    concurrent verifies of one token one session and one InvalidToken."""
    link = (
        SigninLink.objects.select_for_update(of=("self",))
        .select_related("user")
        .filter(token_digest=token_digest(token))
        .first()
    )
    if link is None or link.used_at is not None or link.expires_at <= now:
        raise InvalidToken
    if not link.user.is_active:
        raise InvalidToken
    SigninLink.objects.filter(pk=link.pk).update(used_at=now)
    return SignedIn(user=link.user, session=session_issue(user=link.user, name="signin", now=now))


def signin_links_ended(*, now: datetime) -> QuerySet[SigninLink]:
    """Sign-in links past their end, used or not, that the resend spacing no longer counts:
    what `prune` may delete."""
    return SigninLink.objects.filter(expires_at__lt=now, created_at__lt=now - SPACING_MEMORY)
