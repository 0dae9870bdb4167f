"""Signing back in (README: Signing in and sessions): a single-use link of an existing user,
recorded as the digest of its token (tenancy.link_tokens, purpose `signin`) and valid for 15
minutes, and its verification into a session token. Emailing the link is the onboarding app's part.

Nothing here may tell a caller whether an address has an account: the caller hears the
same whatever `signin_link_record` decided, and every address is counted against the
per-address limit alike.
"""

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import QuerySet

from dbtools.ratelimit import count_request
from dbtools.rates import parse_rate
from tenancy import link_tokens
from tenancy.link_tokens import InvalidToken
from tenancy.models import ApiToken, SigninLink, token_digest
from tenancy.tokens import session_issue

LINK_TTL = timedelta(minutes=15)
# Links emailed to one address, whoever asks and from wherever: an inbox is not flooded.
PER_ADDRESS_RATE = "5/hour"


@dataclass(frozen=True)
class IssuedSignin:
    """Whom the link is for and the reference its email carries where the token goes."""

    user: User
    reference: str


@dataclass(frozen=True)
class SignedIn:
    user: User
    session: ApiToken


def _address_key(email: str) -> str:
    # The counter's key names no address: the rate-limit table is not a list of them.
    return "signin-email:" + hashlib.sha256(email.encode()).hexdigest()[:32]


def signin_link_record(*, email: str, address: str, now: datetime) -> IssuedSignin | None:
    """A new signin link for the active user of `email`, or None when there is none or the
    address was sent PER_ADDRESS_RATE links already. A new link ends the user's earlier
    unused ones: only the latest email works."""
    email = email.strip().lower()
    if not count_request(_address_key(email), parse_rate(PER_ADDRESS_RATE)).allowed:
        return None
    user = get_user_model().objects.filter(email__iexact=email, is_active=True).first()
    if user is None:
        return None
    recipient = user.email.lower()
    link = link_tokens.issue("signin", recipients=[recipient], secret=settings.SECRET_KEY)
    with transaction.atomic():
        SigninLink.objects.filter(user=user, used_at__isnull=True, expires_at__gt=now).update(
            expires_at=now
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
    """Sign-in links past their end, used or not: what `prune` may delete (a used one is
    past its end within minutes too)."""
    return SigninLink.objects.filter(expires_at__lt=now)
