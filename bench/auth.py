"""Authentication cost per request: an opaque `tkw_` token against a JWT of a local identity
provider whose key is cached, in process (Django's test client, SQLite or PostgreSQL).

    .venv/bin/python bench/auth.py [--requests N] [--database-url URL]

For each credential it prints the microseconds of the authentication alone (the
authentication class on a built request: token lookup, or JWT verification + identity
lookup), of a whole `GET /v1/me` and `GET /v1/projects` (tenant routes add the membership),
and the SQL statements of each. It prints figures only.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _setup(database_url: str) -> None:
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": database_url,
            "SECRET_KEY": "bench-only-secret-key",
            "THROTTLE_RATE_USER": "100000000/s",
            "THROTTLE_RATE_ANON": "100000000/s",
            "LOG_LEVEL": "WARNING",
        }
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _per_call_us(call: Callable[[], object], count: int) -> float:
    rounds = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(count // 5):
            call()
        rounds.append((time.perf_counter() - started) / (count // 5) * 1e6)
    return statistics.median(rounds)


def _statements(call: Callable[[], object]) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        call()
    return len(queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--database-url", default="")
    args = parser.parse_args()
    database_url = args.database_url or f"sqlite:///{tempfile.mkdtemp()}/bench.sqlite3"
    _setup(database_url)

    from django.conf import settings
    from django.test import Client, RequestFactory
    from rest_framework.request import Request

    from tenancy.api.authentication import BearerTokenAuthentication
    from tenancy.services import member_add, tenant_create
    from tests.support.oidc_issuer import local_issuer, rsa_key

    grant = tenant_create(name="Bench", owner_email="owner@bench.example")
    with local_issuer(rsa_key("bench")) as issuer:
        settings.OIDC_ISSUER, settings.OIDC_AUDIENCE = issuer.url, issuer.audience
        jwt_token = issuer.token(sub="bench-user", email="jwt@bench.example", exp=2**31 - 1)
        Client().get("/v1/me", HTTP_AUTHORIZATION=f"Bearer {jwt_token}")  # first sight, keys
        member_add(tenant=grant.tenant, email="jwt@bench.example", role="member")
        print(f"database: {database_url.split(':')[0]}, {args.requests} requests per figure")
        print(f"{'credential':<8} {'route':<22} {'µs/request':>11} {'SQL/request':>12}")
        for label, token in (("opaque", grant.token), ("jwt", jwt_token)):
            headers = {
                "HTTP_AUTHORIZATION": f"Bearer {token}",
                "HTTP_X_TENANT_ID": str(grant.tenant.id),
            }
            factory, client = RequestFactory(), Client(**headers)

            def authenticate(headers: dict = headers, factory: RequestFactory = factory) -> None:
                BearerTokenAuthentication().authenticate(Request(factory.get("/v1/me", **headers)))

            figures = [("authentication only", authenticate)]
            figures += [
                (f"GET {path}", lambda p=path, c=client: c.get(p))
                for path in (
                    "/v1/me",
                    "/v1/projects",
                )
            ]
            for name, call in figures:
                call()
                micros = _per_call_us(call, args.requests)
                print(f"{label:<8} {name:<22} {micros:>11.0f} {_statements(call):>12}")
        print(f"JWKS fetches during the run: {issuer.jwks_fetches()}")


if __name__ == "__main__":
    main()
