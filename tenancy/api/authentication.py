"""Bearer-token authentication, shaped like DRF's TokenAuthentication.

Returns None for another scheme (so the request stays anonymous and is denied by the
permission layer with a 401), raises AuthenticationFailed for a bad credential, and
returns (user, credential) for a good one. A bad credential counts against the client
address (tenancy.api.throttling.AuthFailures); an address over that limit is answered 429
before its token is checked.

A bearer is an API token (`tkw_…`, tenancy.token_format) or, when an identity provider is
configured, a JWT of that provider (three base64url parts, tenancy.api.oidc).
"""

from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from dbtools.bookmarks import mark_known_caller, refuse_malformed_routing
from tenancy.api import oidc
from tenancy.api.identities import JwtCredential, jwt_user
from tenancy.api.throttling import AuthFailures, too_many_failures
from tenancy.models import ApiToken
from tenancy.services import AddressBlocked, TokenExpired, TokenRejected, token_authenticate
from web.headers import refuse_repeated_headers
from web.problems import ProblemError

# The issuer is asked again at most once a minute (tenancy.api.oidc.IssuerKeys).
_ISSUER_RETRY_SECONDS = str(int(oidc.REFETCH_INTERVAL_SECONDS))


class BearerTokenAuthentication(BaseAuthentication):
    keyword = b"bearer"

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword:
            return None
        failures = AuthFailures(request)
        if len(parts) != 2:
            raise failures.refuse("The Authorization header must be 'Bearer <token>'.")
        try:
            plaintext = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise failures.refuse("The token is not valid.") from None
        authenticated: tuple[User, ApiToken | JwtCredential]
        try:
            if oidc.looks_like_jwt(plaintext):
                authenticated = _jwt_authenticate(plaintext, failures)
            else:
                authenticated = token_authenticate(
                    plaintext=plaintext,
                    now=timezone.now(),
                    tenant_header=request.headers.get("X-Tenant-ID"),
                    failures=failures.counter,
                )
        except AddressBlocked as exc:
            raise too_many_failures(exc.seconds_left) from None
        except (TokenRejected, oidc.JwtRejected) as exc:
            raise failures.refuse(str(exc), expired=isinstance(exc, TokenExpired)) from None
        # The caller is known from here: a refusal of its headers is an answer to it, with
        # the bookmark an authenticated caller gets (DRF forgets the user on a refusal).
        mark_known_caller(request)
        refuse_repeated_headers(request)
        refuse_malformed_routing(request)
        return authenticated

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


def _jwt_authenticate(token: str, failures: AuthFailures) -> tuple[User, JwtCredential]:
    verifier = oidc.configured_verifier()
    if verifier is None:
        raise TokenRejected("The token is not valid.")
    try:
        claims = verifier.claims(token)
    except oidc.IssuerUnavailable:
        raise ProblemError(
            503,
            "The identity provider's keys cannot be fetched right now; retry later.",
            kind="identity-provider-unavailable",
            headers={"Retry-After": _ISSUER_RETRY_SECONDS},
        ) from None
    user = jwt_user(claims=claims, issuer=verifier.issuer, failures=failures.counter)
    return user, JwtCredential(issuer=verifier.issuer, subject=claims["sub"])
