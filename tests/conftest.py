"""Shared fixtures: Alice owns tenant A, Bob is a member of A, Charlie owns tenant B and must
never see anything of A's."""

import socket
from dataclasses import dataclass

import pytest
from django.conf import settings
from django.core.cache import cache
from rest_framework.test import APIClient

from dbqueue.models import RateWindow
from tenancy.models import Role, Tenant
from tenancy.services import member_add, tenant_create


@dataclass
class Actor:
    user: object
    tenant: Tenant
    role: str
    token: str

    def client(self, *, tenant: Tenant | None = None) -> APIClient:
        """An API client authenticated as this actor, selecting `tenant` (default: own)."""
        client = APIClient()
        headers = {"HTTP_AUTHORIZATION": f"Bearer {self.token}"}
        headers["HTTP_X_TENANT_ID"] = str((tenant or self.tenant).id)
        client.credentials(**headers)
        return client


def make_owner(name: str, email: str) -> Actor:
    grant = tenant_create(name=name, owner_email=email)
    return Actor(user=grant.user, tenant=grant.tenant, role=Role.OWNER, token=grant.token)


def make_member(tenant: Tenant, email: str, role: str = Role.MEMBER) -> Actor:
    grant = member_add(tenant=tenant, email=email, role=role)
    return Actor(user=grant.user, tenant=tenant, role=role, token=grant.token)


@pytest.fixture
def alice(db) -> Actor:
    return make_owner("Tenant A", "alice@example.com")


@pytest.fixture
def bob(alice) -> Actor:
    return make_member(alice.tenant, "bob@example.com")


@pytest.fixture
def charlie(db) -> Actor:
    return make_owner("Tenant B", "charlie@example.com")


@pytest.fixture
def public_dns(monkeypatch) -> None:
    """Every hostname resolves to one public address; nothing reaches a real resolver."""

    def getaddrinfo(host, port, *args, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port or 443))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def signup_on(settings) -> None:
    """Public signup served (it is off by default), without a CAPTCHA to call out to, and
    with a per-address limit no test run reaches (a 429 comes before any 400)."""
    settings.SIGNUP_ENABLED = True
    settings.TURNSTILE_SECRET_KEY = ""
    settings.SIGNUP_RATE_IP = "100000/hour"


@pytest.fixture
def anonymous() -> APIClient:
    return APIClient()


def forget_throttle_counts() -> None:
    """Forget every rate-limit count (its database rows, and the cache for good measure)."""
    cache.clear()
    RateWindow.objects.all().delete()


@pytest.fixture(autouse=True)
def _fresh_throttles(request):
    """One test's requests must not throttle the next. The counters are database rows, which
    a test's rollback or flush removes as well; a test with database access starts without
    any (pytest-django's helper, which `db` and `transactional_db` use, enables access)."""
    cache.clear()
    if "_django_db_helper" in request.fixturenames or request.node.get_closest_marker("django_db"):
        request.getfixturevalue("_django_db_helper")
        forget_throttle_counts()
    yield
    cache.clear()


def _configured_vendor() -> str:
    engine = settings.DATABASES["default"]["ENGINE"]
    return "postgresql" if engine.endswith("postgresql") else "sqlite"


# Concurrency and claim tests need real row locks and real concurrent connections.
requires_postgres = pytest.mark.skipif(
    _configured_vendor() != "postgresql",
    reason="needs PostgreSQL: run the suite with DATABASE_URL=postgres://...",
)
