"""Bearer JWTs from the operator's identity provider (`OIDC_ISSUER`, `OIDC_AUDIENCE`).

Signatures, claims and JWK parsing are PyJWT's; this module decides what is accepted:
- only RS256 and ES256, from this list and never from the token's header (`alg: none` and
  HS256 signed with a public key are refused before any key is looked at), and each key
  verifies only with the algorithm bound to it;
- `exp`, `iss`, `aud` and `sub` required, `iss` and `aud` equal to the settings, 60 s leeway;
- keys come from the issuer's discovery document (`{issuer}/.well-known/openid-configuration`
  → `jwks_uri`) and are cached; the JWKS is fetched at most once a minute whatever happens
  (first use, a `kid` not in the cache, keys older than an hour), so a flood of tokens with
  made-up `kid`s costs the issuer one request a minute.

Fetches go through outbound.http with a timeout and without address vetting: the issuer is
the operator's configuration, not a tenant's input, so the SSRF rules of webhook targets do
not apply (the `jwks_uri` it names is trusted as the issuer is).

Nothing here reads the database; tenancy.api.identities finds the user behind the claims.
"""

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from functools import cache
from typing import Any

import jwt
from django.conf import settings
from jwt import PyJWK, PyJWKClient

from outbound import http

logger = logging.getLogger(__name__)

ALGORITHMS = ("RS256", "ES256")
LEEWAY_SECONDS = 60
REFETCH_INTERVAL_SECONDS = 60.0
KEYS_MAX_AGE_SECONDS = 3600.0
FETCH_TIMEOUT_SECONDS = 5.0
_MAX_DOCUMENT_BYTES = 256 * 1024
_REQUIRED_CLAIMS = ["exp", "iss", "aud", "sub"]
# Three base64url parts; the last is empty in an unsigned (`alg: none`) token.
_JWT_SHAPE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")

Clock = Callable[[], float]
FetchJson = Callable[[str], Any]


class JwtRejected(Exception):
    """The JWT is not acceptable; the message is safe to show (it never quotes the token)."""


class IssuerUnavailable(Exception):
    """No key could be obtained from the identity provider (unreachable, or an answer that is
    not a discovery document or a key set)."""


def looks_like_jwt(bearer: str) -> bool:
    return _JWT_SHAPE.fullmatch(bearer) is not None


def fetch_json(url: str) -> Any:
    """The JSON document at `url`; raises IssuerUnavailable."""
    try:
        response = http.get(
            url,
            headers={"Accept": "application/json"},
            timeout=FETCH_TIMEOUT_SECONDS,
            vet_addresses=False,
            max_body=_MAX_DOCUMENT_BYTES,
        )
    except http.HttpError as exc:
        raise IssuerUnavailable(str(exc)) from None
    if response.status != 200:
        raise IssuerUnavailable(f"answered HTTP {response.status}")
    try:
        return json.loads(response.body)
    except ValueError:
        raise IssuerUnavailable("answered something that is not JSON") from None


class _KeySetReader(PyJWKClient):
    """PyJWT's JWKS client as the parser of a key set fetched by `fetch`, without its own
    cache: IssuerKeys caches, under a clock it is given."""

    def __init__(self, uri: str, fetch: FetchJson) -> None:
        super().__init__(uri, cache_jwk_set=False)
        self._fetch = fetch

    def fetch_data(self) -> Any:
        return self._fetch(self.uri)


class IssuerKeys:
    """The issuer's signing keys by `kid`, fetched at most once per REFETCH_INTERVAL_SECONDS
    of `clock` (seconds, monotonic). A failed refresh keeps the keys already known."""

    def __init__(
        self, issuer: str, *, clock: Clock = time.monotonic, fetch: FetchJson = fetch_json
    ) -> None:
        self.issuer = issuer
        self._clock = clock
        self._fetch = fetch
        self._lock = threading.Lock()
        self._keys: dict[str, PyJWK] | None = None
        self._fetched_at = 0.0
        self._last_attempt: float | None = None

    def key(self, kid: str) -> PyJWK:
        """The key `kid` names; raises JwtRejected if the issuer has none such, and
        IssuerUnavailable when no key set could be fetched at all."""
        with self._lock:
            now = self._clock()
            known = self._keys or {}
            stale = self._keys is None or now - self._fetched_at >= KEYS_MAX_AGE_SECONDS
            if (stale or kid not in known) and self._may_fetch(now):
                self._refresh(now)
            if self._keys is None:
                raise IssuerUnavailable("no key set fetched yet")
            key = self._keys.get(kid)
        if key is None:
            raise JwtRejected("The token is signed with a key the identity provider does not list.")
        return key

    def _may_fetch(self, now: float) -> bool:
        return self._last_attempt is None or now - self._last_attempt >= REFETCH_INTERVAL_SECONDS

    def _refresh(self, now: float) -> None:
        self._last_attempt = now
        try:
            reader = _KeySetReader(self._jwks_uri(), self._fetch)
            keys = reader.get_signing_keys()
        except (IssuerUnavailable, jwt.PyJWTError) as exc:
            logger.warning("identity provider keys not refreshed: %s", exc)
            return
        self._keys = {
            key.key_id: key
            for key in keys
            # PyJWKClient returns signing keys with a kid only; the check narrows the type.
            if key.key_id is not None and key.algorithm_name in ALGORITHMS
        }
        self._fetched_at = now

    def _jwks_uri(self) -> str:
        document = self._fetch(f"{self.issuer}/.well-known/openid-configuration")
        if not isinstance(document, dict) or document.get("issuer") != self.issuer:
            raise IssuerUnavailable("the discovery document names another issuer")
        uri = document.get("jwks_uri")
        if not isinstance(uri, str) or not uri.startswith(("https://", "http://")):
            raise IssuerUnavailable("the discovery document has no usable jwks_uri")
        return uri


class JwtVerifier:
    def __init__(self, *, issuer: str, audience: str, keys: IssuerKeys) -> None:
        self.issuer = issuer
        self.audience = audience
        self.keys = keys

    def claims(self, token: str) -> dict[str, Any]:
        """The verified claims of `token`; raises JwtRejected or IssuerUnavailable."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise JwtRejected("The token is not a well-formed JWT.") from None
        if header.get("alg") not in ALGORITHMS:
            raise JwtRejected(f"Only {', '.join(ALGORITHMS)} signed tokens are accepted.")
        kid = header.get("kid")
        if not isinstance(kid, str):
            raise JwtRejected("The token does not name its signing key (kid).")
        key = self.keys.key(kid)
        try:
            return jwt.decode(
                token,
                key,
                algorithms=list(ALGORITHMS),
                audience=self.audience,
                issuer=self.issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": _REQUIRED_CLAIMS},
            )
        except jwt.PyJWTError as exc:
            raise JwtRejected(_reason(exc)) from None


def _reason(exc: jwt.PyJWTError) -> str:
    if isinstance(exc, jwt.ExpiredSignatureError):
        return "The token has expired."
    if isinstance(exc, jwt.InvalidAudienceError | jwt.InvalidIssuerError):
        return "The token was not issued for this API."
    if isinstance(exc, jwt.MissingRequiredClaimError):
        return "The token lacks a required claim (exp, iss, aud, sub)."
    return "The token's signature or claims are not valid."


@cache
def _verifier(issuer: str, audience: str) -> JwtVerifier:
    return JwtVerifier(issuer=issuer, audience=audience, keys=IssuerKeys(issuer))


def configured_verifier() -> JwtVerifier | None:
    """The verifier of the configured issuer (one key cache per process), or None when no
    identity provider is configured."""
    if not settings.OIDC_ISSUER:
        return None
    return _verifier(settings.OIDC_ISSUER, settings.OIDC_AUDIENCE)
