"""A user's own API tokens: list, issue (the secret is returned once), revoke."""

from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from tenancy.models import ApiToken


def tokens_of(user: AbstractBaseUser) -> QuerySet[ApiToken]:
    """The user's tokens that are not revoked (expired ones included: they show when)."""
    return ApiToken.objects.filter(user=user, revoked_at__isnull=True)


def token_issue(
    *, user: AbstractBaseUser, name: str, expires_in_days: int | None, now: datetime
) -> ApiToken:
    """A new token of `user`; its plaintext is on `.plaintext` of the returned row only."""
    expires_at = None if expires_in_days is None else now + timedelta(days=expires_in_days)
    token, plaintext = ApiToken.issue(user=user, name=name, expires_at=expires_at, now=now)
    token.plaintext = plaintext
    return token


def token_revoke(*, user: AbstractBaseUser, token_id: int, now: datetime) -> None:
    """Revoke one of `user`'s tokens: its next request is a 401. Another user's token, or a
    revoked one, is ApiToken.DoesNotExist (404)."""
    revoked = tokens_of(user).filter(pk=token_id).update(revoked_at=now)
    if not revoked:
        raise ApiToken.DoesNotExist
