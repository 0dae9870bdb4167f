"""The API's rate limits, counted in the database every web worker shares (dbtools.ratelimit).

- `UserRateThrottle`: authenticated requests, per user (`THROTTLE_RATE_USER`); a scoped
  credential (tenancy.api.scoped: a portal session) is counted as a user of its own.
- `AddressRateThrottle`: requests without credentials, per client address
  (`THROTTLE_RATE_ANON`). Both are the default throttle classes, so every public view is
  covered without saying so; a view that requires a token answers an anonymous request 401
  before throttles run, which costs no statement.
- `AuthFailures`: requests whose token is wrong, malformed or revoked count against their
  address (`THROTTLE_RATE_AUTH_FAILURES`); once an address is over, every request from it
  answers 429 whatever its token, so tokens cannot be guessed at the server's speed.

The client address is REMOTE_ADDR. `X-Forwarded-For` is read only when the operator says
how many proxies in front of the app append to it (`TRUSTED_PROXY_COUNT`): then the client
is the entry that many places from the right, the one the outermost trusted proxy saw. An
IPv6 client is counted by its /64 network, which one subscriber usually holds whole.
"""

import ipaddress
from typing import Any

from django.conf import settings
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from dbtools.ratelimit import Hit, count_request, uncount_request
from dbtools.rates import Rate, parse_rate
from tenancy.api.permissions import tenant_of
from tenancy.api.scoped import ScopedCredential
from tenancy.plans import tenant_limits
from tenancy.services import FailureLimit


def client_address(request: Request) -> str:
    """The address a request is counted against (see the module's docstring)."""
    address = request.META.get("REMOTE_ADDR", "")
    hops = settings.TRUSTED_PROXY_COUNT
    if hops:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")
        entries = [entry.strip() for entry in forwarded if entry.strip()]
        if entries:
            address = entries[-min(hops, len(entries))]
    return _counted_network(address) or _counted_network(request.META.get("REMOTE_ADDR", ""))


def _counted_network(address: str) -> str:
    try:
        parsed = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return ""
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.IPv6Network((parsed, 64), strict=False))
    return str(parsed)


class _CountingThrottle(BaseThrottle):
    """Counts the requests it applies to under `key(request)` at the rate `rate()` names."""

    def __init__(self) -> None:
        self._hit: Hit | None = None

    def key(self, request: Request) -> str | None:
        raise NotImplementedError

    def rate(self) -> Rate:
        raise NotImplementedError

    def allow_request(self, request: Request, view: Any) -> bool:
        key = self.key(request)
        if key is None:
            return True
        self._hit = count_request(key, self.rate())
        return self._hit.allowed

    def wait(self) -> float | None:
        return None if self._hit is None else self._hit.seconds_left


class UserRateThrottle(_CountingThrottle):
    """Per user (`THROTTLE_RATE_USER`); on a route that acts in a tenant whose plan sets
    `requests_per_minute`, per tenant at that rate instead: the plan is the tenant's
    allowance whoever of its members sends the requests."""

    def __init__(self) -> None:
        super().__init__()
        self._plan_rate: Rate | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        tenant = getattr(request, "tenant", None)
        per_minute = None if tenant is None else tenant_limits(tenant).requests_per_minute
        self._plan_rate = None if per_minute is None else Rate(per_minute, 60)
        return super().allow_request(request, view)

    def key(self, request: Request) -> str | None:
        if self._plan_rate is not None:
            return f"tenant:{tenant_of(request).pk}"
        if isinstance(request.auth, ScopedCredential):
            return f"scoped:{request.auth.key}"
        user = request.user
        return f"user:{user.pk}" if user is not None and user.is_authenticated else None

    def rate(self) -> Rate:
        return self._plan_rate or parse_rate(settings.THROTTLE_RATE_USER)


class AddressRateThrottle(_CountingThrottle):
    def key(self, request: Request) -> str | None:
        user = request.user
        if user is not None and user.is_authenticated:
            return None
        if isinstance(request.auth, ScopedCredential):
            return None
        return f"anon:{client_address(request)}"

    def rate(self) -> Rate:
        return parse_rate(settings.THROTTLE_RATE_ANON)


class AuthFailures:
    """The failed-authentication limit of one request's client address."""

    def __init__(self, request: Request) -> None:
        self.rate = parse_rate(settings.THROTTLE_RATE_AUTH_FAILURES)
        self.counter = FailureLimit(
            key=f"authfail:{client_address(request)}", limit=self.rate.limit
        )

    def refuse(self, detail: str, *, expired: bool = False) -> exceptions.APIException:
        """Count this request's failure: the 401 to raise (`token-expired` when the token
        was genuine but out of time), or the 429 once the address has failed more often
        than the limit allows."""
        hit = count_request(self.counter.key, self.rate)
        if hit.allowed:
            return (
                TokenExpiredFailure(detail) if expired else exceptions.AuthenticationFailed(detail)
            )
        return too_many_failures(hit.seconds_left)


class TokenExpiredFailure(exceptions.AuthenticationFailed):
    """A 401 whose problem type tells a client to sign in again."""

    kind = "token-expired"


def too_many_failures(seconds_left: float) -> exceptions.Throttled:
    return exceptions.Throttled(
        wait=seconds_left,
        detail="Too many failed authentications from this address; retry later.",
    )


class AttemptThrottle(_CountingThrottle):
    """A per-address limit on attempts that e-mail a link. A request refused as malformed
    (400: a mistyped address, a failed CAPTCHA) sends nothing, so the view takes its count
    back (`take_back`): a typo must not lock a person out for the rest of the window."""

    def __init__(self) -> None:
        super().__init__()
        self._key: str | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        self._key = self.key(request)
        return super().allow_request(request, view)

    def take_back(self) -> None:
        if self._key is not None and self._hit is not None:
            uncount_request(self._key)
            self._hit = None


class SignupAddressThrottle(AttemptThrottle):
    """Signup attempts per client address (`SIGNUP_RATE_IP`), whoever the caller is."""

    def key(self, request: Request) -> str | None:
        return f"signup:{client_address(request)}"

    def rate(self) -> Rate:
        return parse_rate(settings.SIGNUP_RATE_IP)


class SigninAddressThrottle(AttemptThrottle):
    """Signin attempts per client address (`SIGNIN_RATE_IP`), whoever the caller is."""

    def key(self, request: Request) -> str | None:
        return f"signin:{client_address(request)}"

    def rate(self) -> Rate:
        return parse_rate(settings.SIGNIN_RATE_IP)
