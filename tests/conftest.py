"""Shared fixtures: Alice owns tenant A, Bob is a member of A, Charlie owns tenant B and must
never see anything of A's."""

import os
import socket
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core import mail
from django.core.cache import cache
from django.db import connections
from hypothesis import settings as hypothesis_settings
from rest_framework.test import APIClient

from dbqueue.listen import LISTEN_DB_ALIAS
from dbtools.models import RateWindow
from delivery.scheduler.paced import forget_budgets
from tenancy import link_tokens
from tenancy.models import Role, Tenant
from tenancy.plans import forget_plans
from tenancy.services import member_add, tenant_create
from tests.delivery.factories import make_tenant
from tests.support.mail import use_email_backend
from tests.support.sqlite_files import migrated_file
from tests.support.static_files import static_files_walked_once

# No deadline per example: a busy machine (CI runs the suite beside other work, in parallel)
# makes an example slow, never wrong. Each test's example count still bounds its run.
hypothesis_settings.register_profile("tickwork", deadline=None)
hypothesis_settings.load_profile("tickwork")


@dataclass
class Actor:
    user: User
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


def link_token(reference: str, address: str) -> str:
    """The token a link reference stands for in an email to `address`, derived as the tick
    does when it sends that email (for tests that skip the email)."""
    return link_tokens.render(reference, recipients=[address], secret=settings.SECRET_KEY)


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
def tenant(db) -> Tenant:
    """A tenant with no members, for the rows the delivery engine and the services work on."""
    return make_tenant()


@pytest.fixture
def local_channels(settings) -> None:
    """Webhooks may target the local test servers (plain http on 127.0.0.1)."""
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True


@pytest.fixture
def local_mail(settings) -> list:
    """E-mail goes through Django's own backend, not Resend: the locmem one, whose outbox
    (`django.core.mail.outbox`) this returns."""
    settings.RESEND_API_KEY = ""
    use_email_backend(settings)
    return mail.outbox


@pytest.fixture
def admin_client(db, client):
    """Django's test client logged in as a superuser of the admin (no password: hashing one
    would dominate the test's time). Replaces pytest-django's fixture of the same name."""
    user = get_user_model().objects.create_superuser("support", "support@example.com", None)
    client.force_login(user)
    return client


@pytest.fixture
def public_dns(monkeypatch) -> None:
    """Every hostname resolves to one public address; nothing reaches a real resolver."""

    def getaddrinfo(host, port, *args, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port or 443))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def signup_on(settings) -> None:
    """Public signup and signin served (they are off by default), without a CAPTCHA to call
    out to, and with per-address limits no test run reaches (a 429 comes before any 400)."""
    settings.SIGNUP_ENABLED = True
    settings.TURNSTILE_SECRET_KEY = ""
    settings.SIGNUP_RATE_IP = "100000/hour"
    settings.SIGNIN_RATE_IP = "100000/hour"


@pytest.fixture
def anonymous() -> APIClient:
    return APIClient()


def forget_throttle_counts() -> None:
    """Forget every rate-limit count (its database rows, and the cache for good measure)."""
    cache.clear()
    RateWindow.objects.all().delete()


@pytest.fixture(autouse=True, scope="session")
def _static_files_walked_once():
    """Every test client loads the middleware anew; WhiteNoise's walk of the static files
    is done once per process, as a server does (tests/support/static_files.py)."""
    with static_files_walked_once():
        yield


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory) -> Path:
    """One migrated SQLite file per test process, for tests whose processes run on a file of
    their own: each copies it (tests/support/sqlite_files.py) instead of migrating."""
    return migrated_file(tmp_path_factory.mktemp("migrated") / "db.sqlite3")


@pytest.fixture(autouse=True)
def _plans_read_once_per_test(monkeypatch):
    """A plan read stays cached for the whole test: a test that counts a request's
    statements must not see one more because a busy machine let the cache's 10 s run out
    between its requests. Tests that change a plan call forget_plans(), as an operator's
    change reaches a process."""
    monkeypatch.setattr("tenancy.plans._CACHE_SECONDS", 24 * 3600.0)


@pytest.fixture(autouse=True)
def _replica_positions_read_once_per_test(monkeypatch):
    """Likewise the replicas' probes and the primary's log position (PostgreSQL with
    replicas): cached for the whole test rather than a second, so a busy machine cannot
    add a statement to the second of two counted requests."""
    from dbtools import replicas

    monkeypatch.setattr(replicas, "HEALTHY_FOR_SECONDS", 24 * 3600.0)


@pytest.fixture(autouse=True)
def _fresh_throttles(request):
    """One test's requests must not throttle the next. The counters are database rows, which
    a test's rollback or flush removes as well; a test with database access starts without
    any (pytest-django's helper, which `db` and `transactional_db` use, enables access)."""
    cache.clear()
    forget_plans()
    forget_budgets()
    if "_django_db_helper" in request.fixturenames or request.node.get_closest_marker("django_db"):
        request.getfixturevalue("_django_db_helper")
        forget_throttle_counts()
    yield
    cache.clear()


def _configured_vendor() -> str:
    engine = settings.DATABASES["default"]["ENGINE"]
    return "postgresql" if engine.endswith("postgresql") else "sqlite"


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto`: one worker more than there are cores. A worker per core leaves a core
    idle for much of a pass: tests wait on processes they start (servers, ticks, the demo, a
    browser) and on leases, and PostgreSQL does part of every test's work in processes of its
    own. On 2 cores the SQLite pass took 3m02s with 2 workers and 2m45s with 3; the
    PostgreSQL pass 4m22s with 2, 3m45s with 3 and 3m47s with 4. PYTEST_XDIST_AUTO_NUM_WORKERS
    still wins (None leaves the count to xdist)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return len(os.sched_getaffinity(0)) + 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The fault tests first, in the order they were collected. xdist hands each worker a
    contiguous share of the collection and moves queued tests, never a running one, so a
    fault test that starts late (the longest waits out a 30 s lease) held the whole pass
    open alone. First, they run one after another on one worker from the start, mostly
    waiting, while the others take the CPU-bound tests."""
    items.sort(key=lambda item: item.get_closest_marker("fault") is None)


# Concurrency and claim tests need real row locks and real concurrent connections.
requires_postgres = pytest.mark.skipif(
    _configured_vendor() != "postgresql",
    reason="needs PostgreSQL: run the suite with DATABASE_URL=postgres://...",
)

# Tests of SQLite itself, or of processes on a SQLite file of their own whatever DATABASE_URL
# says: the SQLite pass runs them, the PostgreSQL pass would only run them again.
sqlite_only = pytest.mark.skipif(
    _configured_vendor() != "sqlite",
    reason="SQLite only (whatever DATABASE_URL says): the SQLite pass runs it",
)

# Start-up checks whose processes get a DATABASE_URL of their own and never reach the pass's
# database: the SQLite pass runs them, the PostgreSQL pass would only run them again.
runs_without_the_pass_database = pytest.mark.skipif(
    _configured_vendor() != "sqlite",
    reason="never uses the pass's database (whatever DATABASE_URL says): the SQLite pass runs it",
)


# --- Through a transaction pooler (README: Scale) -------------------------------------------
# With TEST_PGBOUNCER_URL=postgres://user@host:port (a PgBouncer in transaction mode in front
# of DATABASE_URL's server), the test database is still created and dropped over DATABASE_URL
# directly — CREATE/DROP DATABASE do not belong behind a pooler — and every test, and every
# worker process a test starts, connects through the pooler.
_DIRECT: dict[str, object] = {}


def _pooler() -> tuple[str, int] | None:
    url = os.environ.get("TEST_PGBOUNCER_URL", "").strip()
    if not url:
        return None
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 6432


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """Also gives the test database a direct `listen` alias (what DATABASE_LISTEN_URL
    configures): a test that sets DATABASE_LISTEN_URL and lists the alias in its databases
    runs workers that LISTEN on it."""
    default = connections["default"]
    _DIRECT.update(HOST=default.settings_dict["HOST"], PORT=default.settings_dict["PORT"])
    settings.DATABASES[LISTEN_DB_ALIAS] = direct_database_settings()
    pooler = _pooler()
    if default.vendor == "sqlite" and default.is_in_memory_db():
        # An in-memory database lives while a connection to it is open. The suite's
        # connections come and go with their threads and ticks, and are freed once
        # dropped: this one holds the database for the whole session.
        with sqlite3.connect(default.settings_dict["NAME"], uri=True) as holder:
            yield
        holder.close()
        return
    if pooler is None or default.vendor != "postgresql":
        yield
        return
    with django_db_blocker.unblock():
        default.close()
        default.settings_dict["HOST"], default.settings_dict["PORT"] = pooler
        yield
        default.close()
        _release_pooled_connections(pooler, default.settings_dict["NAME"])
        default.settings_dict.update(_DIRECT)


def _release_pooled_connections(pooler: tuple[str, int], database: str) -> None:
    """PgBouncer keeps server connections to the test database; DROP DATABASE needs them
    gone (KILL closes them and holds new clients back until RESUME). The admin console
    speaks only the simple query protocol."""
    host, port = pooler
    user = connections["default"].settings_dict["USER"]
    with psycopg.connect(host=host, port=port, user=user, dbname="pgbouncer") as admin:
        admin.autocommit = True
        admin.pgconn.exec_(f"KILL {database}".encode())
        admin.pgconn.exec_(f"RESUME {database}".encode())


# A server session terminated behind a transaction pooler is not the client's session: the
# pooler gives the client another, so a test of a worker losing its session means nothing.
direct_sessions_only = pytest.mark.skipif(
    _pooler() is not None,
    reason="behind a transaction pooler, terminating a server session does not end the worker's",
)


def direct_database_settings() -> dict:
    """The test database's connection settings, bypassing any pooler."""
    return {**connections["default"].settings_dict, **_DIRECT}


# --- end of the transaction pooler ------------------------------------------------------------
