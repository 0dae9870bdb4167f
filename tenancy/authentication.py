"""Bearer-token authentication, shaped like DRF's TokenAuthentication.

Returns None for another scheme (so the request stays anonymous and is denied by the
permission layer with a 401), raises AuthenticationFailed for a bad credential, and
returns (user, token) for a good one. A bad credential counts against the client address
(tenancy.throttling.AuthFailures); an address over that limit is answered 429 before its
token is checked.
"""

from typing import Any

from django.utils import timezone
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from dbqueue.bookmarks import refuse_malformed_routing
from tenancy.services import AddressBlocked, TokenRejected, token_authenticate
from tenancy.throttling import AuthFailures, too_many_failures


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
        try:
            authenticated = token_authenticate(
                plaintext=plaintext,
                now=timezone.now(),
                tenant_header=request.headers.get("X-Tenant-ID"),
                failures=failures.counter,
            )
        except AddressBlocked as exc:
            raise too_many_failures(exc.seconds_left) from None
        except TokenRejected as exc:
            raise failures.refuse(str(exc)) from None
        refuse_malformed_routing(request)
        return authenticated

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'
