"""A local OpenID Connect issuer for tests: a real HTTP server on 127.0.0.1 serving its
discovery document and its JWKS, with signing keys made here (RSA 2048 and EC P-256), that
mints JWTs. `publish` changes the keys it lists (a rotation)."""

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tests.support.http_server import RecordedRequest, RecordingServer, Reply

DISCOVERY_PATH = "/.well-known/openid-configuration"
JWKS_PATH = "/jwks.json"


@dataclass
class SigningKey:
    kid: str
    algorithm: str
    private: Any

    def jwk(self) -> dict[str, Any]:
        algorithm = jwt.get_algorithm_by_name(self.algorithm)
        public = json.loads(algorithm.to_jwk(self.private.public_key()))
        return {**public, "kid": self.kid, "use": "sig", "alg": self.algorithm}


def rsa_key(kid: str) -> SigningKey:
    return SigningKey(kid, "RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048))


def ec_key(kid: str) -> SigningKey:
    return SigningKey(kid, "ES256", ec.generate_private_key(ec.SECP256R1()))


@dataclass
class LocalIssuer:
    server: RecordingServer
    audience: str = "tickwork-api"
    published: list[SigningKey] = field(default_factory=list)
    discovery_issuer: str | None = None  # another issuer's name in the document, if set
    failing: bool = False

    @property
    def url(self) -> str:
        return self.server.url

    def publish(self, *keys: SigningKey) -> None:
        self.published = list(keys)

    def jwks_fetches(self) -> int:
        return len(self.server.received(JWKS_PATH))

    def claims(self, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        claims = {
            "iss": self.url,
            "aud": self.audience,
            "sub": "idp-user-1",
            "exp": now + 300,
            "iat": now,
            "email": "jo@example.com",
            "email_verified": True,
        }
        claims.update(overrides)
        return {name: value for name, value in claims.items() if value is not None}

    def token(self, key: SigningKey | None = None, *, kid: str | None = None, **claims: Any) -> str:
        key = key or self.published[0]
        headers = {"kid": kid or key.kid}
        return jwt.encode(self.claims(**claims), key.private, key.algorithm, headers=headers)

    def respond(self, request: RecordedRequest) -> Reply:
        if self.failing:
            return Reply(status=503, body=b"down")
        if request.path == DISCOVERY_PATH:
            document = {
                "issuer": self.discovery_issuer or self.url,
                "jwks_uri": self.url + JWKS_PATH,
            }
            return _json(document)
        if request.path == JWKS_PATH:
            return _json({"keys": [key.jwk() for key in self.published]})
        return Reply(status=404, body=b"{}")


def _json(document: dict[str, Any]) -> Reply:
    return Reply(headers={"Content-Type": "application/json"}, body=json.dumps(document).encode())


@contextmanager
def local_issuer(*keys: SigningKey) -> Iterator[LocalIssuer]:
    server = RecordingServer()
    issuer = LocalIssuer(server=server, published=list(keys))
    server.responder = issuer.respond
    server.start()
    try:
        yield issuer
    finally:
        server.stop()
