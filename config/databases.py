"""The databases of DATABASE_URL, DATABASE_REPLICA_URLS and DATABASE_LISTEN_URL, as Django
database settings with the options each engine needs."""

from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured

from config.environment import env, flag, read

_SCHEMES = ("sqlite", "postgres", "postgresql")


def database_url(default: str) -> dict[str, Any]:
    """DATABASE_URL (else `default`) as a Django database. A URL of another scheme, or none,
    stops start-up with one line naming what is wrong, never the URL (it may hold a
    password)."""
    url = env.str("DATABASE_URL", default=default).strip()
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in _SCHEMES:
        got = f"a {scheme}:// URL" if scheme else "no URL scheme"
        raise ImproperlyConfigured(
            f"DATABASE_URL must be a sqlite:/// or postgres:// URL, got {got}"
        )
    try:
        return environ.Env.db_url_config(url)
    except (ValueError, TypeError, KeyError) as exc:
        raise ImproperlyConfigured(f"DATABASE_URL is invalid: {exc}") from None


def configured_database(database: dict[str, Any]) -> dict[str, Any]:
    """`database` (a parsed URL) with the options its engine needs; another engine than
    SQLite or PostgreSQL stops start-up."""
    engine = database.get("ENGINE", "")
    if engine == "django.db.backends.sqlite3":
        # WAL lets readers run beside the single writer; IMMEDIATE transactions plus a busy
        # timeout make concurrent processes queue for the write lock instead of failing.
        database.setdefault("OPTIONS", {}).update(
            {
                "timeout": 30,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            }
        )
    elif engine == "django.db.backends.postgresql":
        if flag("DATABASE_PREPARED_STATEMENTS", True):
            # Server-side binding sends the statement text and its parameters apart, so
            # psycopg can prepare a statement once per connection after a few runs: the
            # fenced write-backs are planned once, not on every call (the claim opts out,
            # dbqueue.claims). A transaction-mode PgBouncer older than 1.21 (or without
            # max_prepared_statements) cannot follow prepared statements across server
            # connections: turn this off.
            database.setdefault("OPTIONS", {}).update(
                {"server_side_binding": True, "prepare_threshold": 2}
            )
    else:
        raise ImproperlyConfigured(
            "DATABASE_URL must be a sqlite:/// or postgres:// URL, got scheme for "
            f"engine {engine or 'unknown'!r}"
        )
    # Reusing connections doubles API throughput on PostgreSQL (a new backend per request
    # costs more than the request's own statements); health checks drop dead ones.
    database["CONN_MAX_AGE"] = read("CONN_MAX_AGE", env.int, 60)
    database["CONN_HEALTH_CHECKS"] = True
    database.setdefault("TEST", {})
    return database


def postgres_url(name: str, url: str) -> dict[str, Any]:
    """A postgres:// URL as a Django database, with the same options as DATABASE_URL's."""
    url = url.strip()
    if not url.startswith(("postgres://", "postgresql://")):
        raise ImproperlyConfigured(f"{name} must list postgres:// URLs, got {url[:12]!r}…")
    try:
        database = environ.Env.db_url_config(url)
    except (ValueError, TypeError, KeyError) as exc:
        raise ImproperlyConfigured(f"{name} is invalid: {exc}") from None
    if not database.get("NAME"):
        raise ImproperlyConfigured(f"{name} must name a database in each URL")
    return configured_database(database)


def replica_databases(primary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The replicas of DATABASE_REPLICA_URLS, which need a PostgreSQL `primary` (the default
    database); under a test runner each mirrors the default database."""
    urls = [url for url in read("DATABASE_REPLICA_URLS", env.str, "").split(",") if url.strip()]
    if urls and primary["ENGINE"] != "django.db.backends.postgresql":
        raise ImproperlyConfigured("DATABASE_REPLICA_URLS needs a postgres:// DATABASE_URL")
    replicas = {}
    for index, url in enumerate(urls):
        replica = postgres_url("DATABASE_REPLICA_URLS", url)
        # A replica that does not answer must cost a request seconds, not minutes.
        replica.setdefault("OPTIONS", {}).setdefault("connect_timeout", 3)
        replica["TEST"] = {"MIRROR": "default"}
        replicas[f"replica_{index}"] = replica
    return replicas
