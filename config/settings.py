"""Tickwork settings: one module, configured from the environment (and an optional `.env`).

Every variable is read through `_read`, so a malformed value stops start-up with
`ImproperlyConfigured` naming the variable instead of failing later in a worker.
"""

import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

from dbqueue.rates import parse_rate
from outbound.redaction import install_log_redaction

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)


def _read(name: str, cast: Any, default: Any) -> Any:
    try:
        return cast(name, default=default)
    except (ValueError, TypeError, KeyError, ImproperlyConfigured) as exc:
        raise ImproperlyConfigured(f"{name} is invalid: {exc}") from None


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off", ""}


def _flag(name: str, default: bool) -> bool:
    """A boolean variable; anything but true/false/1/0/yes/no/on/off stops start-up
    (django-environ would read a typo such as `ture` as false without a word)."""
    raw = env.str(name, default=str(default)).strip().lower()
    if raw not in _TRUE | _FALSE:
        raise ImproperlyConfigured(
            f"{name} must be one of true/false, 1/0, yes/no, on/off, got {raw!r}"
        )
    return raw in _TRUE


def _positive(name: str, value: float) -> float:
    if value <= 0:
        raise ImproperlyConfigured(f"{name} must be greater than zero, got {value}")
    return value


def _not_negative(name: str, value: int) -> int:
    if value < 0:
        raise ImproperlyConfigured(f"{name} must be zero or more, got {value}")
    return value


def _seconds_list(name: str, default: str) -> tuple[int, ...]:
    raw = _read(name, env.str, default)
    try:
        steps = tuple(int(part) for part in raw.split(",") if part.strip())
    except ValueError:
        raise ImproperlyConfigured(
            f"{name} must be comma-separated whole seconds, e.g. {default!r}"
        ) from None
    if not steps or any(step <= 0 for step in steps):
        raise ImproperlyConfigured(f"{name} must list at least one positive number of seconds")
    return steps


def _url_problem(url: str) -> str | None:
    """What the outbound HTTP client would refuse in `url`, or None."""
    if any(char.isspace() or not char.isprintable() for char in url):
        return "must not contain spaces or control characters"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "is not a valid URL (check the host and the port)"
    if parts.scheme not in ("http", "https"):
        return "must use http or https"
    if not parts.hostname:
        return "must name a host"
    if port == 0:
        return "has an invalid port"
    if parts.username is not None or parts.password is not None:
        return "must not carry credentials"
    return None


def _http_url(name: str, default: str) -> str:
    """An optional http(s) URL; one the outbound client would refuse stops start-up."""
    url = _read(name, env.str, default)
    problem = _url_problem(url) if url else None
    if problem:
        raise ImproperlyConfigured(f"{name} {problem}, e.g. https://provisioning.example.com/v1")
    return url


DEBUG = _flag("DEBUG", False)
SECRET_KEY = _read("SECRET_KEY", env.str, "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set (it may be omitted only with DEBUG=true)"
        )
    SECRET_KEY = "insecure-development-key-never-used-in-production"  # noqa: S105

ALLOWED_HOSTS = _read("ALLOWED_HOSTS", env.list, ["localhost", "127.0.0.1", "[::1]", "testserver"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "dbqueue",
    "tenancy",
    "projects",
    "jobs",
    "notifications",
    "onboarding",
    "operations",
]

MIDDLEWARE = [
    # Outermost: every /v1/ answer, a refused one too, carries its Tickwork-Bookmark.
    "dbqueue.bookmarks.BookmarkMiddleware",
    "web.problems.RequestSizeLimitMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def _database(database: dict[str, Any]) -> dict[str, Any]:
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
        if _flag("DATABASE_PREPARED_STATEMENTS", True):
            # Server-side binding sends the statement text and its parameters apart, so
            # psycopg can prepare a statement once per connection after a few runs: the
            # claim and the fenced write-backs are planned once, not on every call. A
            # transaction-mode PgBouncer older than 1.21 (or without max_prepared_statements)
            # cannot follow prepared statements across server connections: turn this off.
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
    database["CONN_MAX_AGE"] = _read("CONN_MAX_AGE", env.int, 60)
    database["CONN_HEALTH_CHECKS"] = True
    database.setdefault("TEST", {})
    return database


DATABASES = {
    "default": _database(_read("DATABASE_URL", env.db_url, f"sqlite:///{BASE_DIR / 'db.sqlite3'}"))
}

# --- Read replicas and the LISTEN connection (DESIGN.md §10) -------------------------------
# API reads go to a healthy replica (dbqueue.replicas, dbqueue.bookmarks); under a test
# runner each replica mirrors the test database instead of being created.
REPLICA_MAX_LAG_SECONDS = _positive(
    "REPLICA_MAX_LAG_SECONDS", _read("REPLICA_MAX_LAG_SECONDS", env.float, 30.0)
)


def _postgres_url(name: str, url: str) -> dict[str, Any]:
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
    return _database(database)


def _replicas() -> dict[str, dict[str, Any]]:
    urls = [url for url in _read("DATABASE_REPLICA_URLS", env.str, "").split(",") if url.strip()]
    if urls and DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        raise ImproperlyConfigured("DATABASE_REPLICA_URLS needs a postgres:// DATABASE_URL")
    replicas = {}
    for index, url in enumerate(urls):
        replica = _postgres_url("DATABASE_REPLICA_URLS", url)
        # A replica that does not answer must cost a request seconds, not minutes.
        replica.setdefault("OPTIONS", {}).setdefault("connect_timeout", 3)
        replica["TEST"] = {"MIRROR": "default"}
        replicas[f"replica_{index}"] = replica
    return replicas


DATABASES.update(_replicas())
DATABASE_ROUTERS = ["dbqueue.replicas.ReplicaRouter"]
# consume_jobs --loop LISTENs on this direct connection (never through DATABASE_URL, which
# may be a transaction pooler that cannot keep a LISTEN); unset, the worker polls.
DATABASE_LISTEN_URL = _read("DATABASE_LISTEN_URL", env.str, "").strip()
if DATABASE_LISTEN_URL:
    DATABASES["listen"] = _postgres_url("DATABASE_LISTEN_URL", DATABASE_LISTEN_URL)
    DATABASES["listen"]["TEST"] = {"MIRROR": "default"}
# --- end of read replicas -------------------------------------------------------------------
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# The API docs and the admin must work under any WSGI server without a separate static
# file server; serving straight from the app directories spares a collectstatic step.
WHITENOISE_USE_FINDERS = True
# Without collectstatic the STATIC_ROOT folder does not exist; WhiteNoise would warn about
# it in every process although the finders serve every asset.
warnings.filterwarnings("ignore", message="No directory at", category=UserWarning)

CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

MAX_REQUEST_BYTES = int(
    _positive("MAX_REQUEST_BYTES", _read("MAX_REQUEST_BYTES", env.int, 1_048_576))
)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BYTES


def _rate(name: str, default: str) -> str:
    raw = _read(name, env.str, default)
    try:
        parse_rate(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} is invalid: {exc}") from None
    return raw


# Counted in the database every web worker shares (tenancy.throttling, dbqueue.ratelimit).
THROTTLE_RATE_USER = _rate("THROTTLE_RATE_USER", "600/min")
THROTTLE_RATE_ANON = _rate("THROTTLE_RATE_ANON", "60/min")
THROTTLE_RATE_AUTH_FAILURES = _rate("THROTTLE_RATE_AUTH_FAILURES", "30/min")
# Proxies in front of the app that append the address they saw to X-Forwarded-For; 0 (the
# default) means the header is never read and REMOTE_ADDR is the client's address.
TRUSTED_PROXY_COUNT = _read("TRUSTED_PROXY_COUNT", env.int, 0)
if TRUSTED_PROXY_COUNT < 0:
    raise ImproperlyConfigured(f"TRUSTED_PROXY_COUNT must be 0 or more, got {TRUSTED_PROXY_COUNT}")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["tenancy.authentication.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["tenancy.permissions.IsTenantMember"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["web.parsers.StrictJSONParser"],
    "DEFAULT_THROTTLE_CLASSES": [
        "tenancy.throttling.AddressRateThrottle",
        "tenancy.throttling.UserRateThrottle",
    ],
    "EXCEPTION_HANDLER": "web.problems.problem_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "tenancy.schema.TickworkAutoSchema",
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Tickwork API",
    "DESCRIPTION": (
        "Multi-tenant API. Authenticate with `Authorization: Bearer <token>` and choose the "
        "tenant with `X-Tenant-ID` (optional when you belong to exactly one tenant). "
        "Errors are RFC 9457 problem details (`application/problem+json`)."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
}

# --- Idempotency -------------------------------------------------------------------------
IDEMPOTENCY_KEY_TTL_SECONDS = int(
    _positive("IDEMPOTENCY_KEY_TTL_SECONDS", _read("IDEMPOTENCY_KEY_TTL_SECONDS", env.int, 86_400))
)

# --- External identity provider (OIDC bearer JWTs) -----------------------------------------
# Both or neither: with them, a bearer that is a JWT is checked against the issuer's keys
# (tenancy.oidc). The issuer is the operator's choice, so its host is not vetted like a
# tenant's webhook target; it must be https unless it is this machine (a local stand-in).
OIDC_ISSUER = _http_url("OIDC_ISSUER", "").rstrip("/")
OIDC_AUDIENCE = _read("OIDC_AUDIENCE", env.str, "")
if bool(OIDC_ISSUER) != bool(OIDC_AUDIENCE):
    raise ImproperlyConfigured("OIDC_ISSUER and OIDC_AUDIENCE must be set together, or neither")
_OIDC_LOCAL = urlsplit(OIDC_ISSUER).hostname in ("127.0.0.1", "localhost", "::1")
if OIDC_ISSUER and urlsplit(OIDC_ISSUER).scheme != "https" and not (DEBUG or _OIDC_LOCAL):
    raise ImproperlyConfigured("OIDC_ISSUER must be an https URL, e.g. https://login.example.com")

# --- Notifications scheduler (run_tick) ----------------------------------------------------
TICK_LIMIT = int(_positive("TICK_LIMIT", _read("TICK_LIMIT", env.int, 100)))
CLAIM_LEASE_SECONDS = _positive(
    "CLAIM_LEASE_SECONDS", _read("CLAIM_LEASE_SECONDS", env.float, 45.0)
)
CHANNEL_TIMEOUT_SECONDS = _positive(
    "CHANNEL_TIMEOUT_SECONDS", _read("CHANNEL_TIMEOUT_SECONDS", env.float, 10.0)
)
# The environment keeps the seed's name (MAX_ATTEMPTS); the setting says whose attempts they are.
NOTIFICATION_MAX_ATTEMPTS = int(_positive("MAX_ATTEMPTS", _read("MAX_ATTEMPTS", env.int, 3)))
BACKOFF_SECONDS = _seconds_list("BACKOFF_SECONDS", "60,300,1800")
TICK_CONCURRENCY = int(_positive("TICK_CONCURRENCY", _read("TICK_CONCURRENCY", env.int, 16)))
# CPU one row may cost to find its schedule's next occurrence; costlier rules are refused.
RECURRENCE_BUDGET_MS = _positive(
    "RECURRENCE_BUDGET_MS", _read("RECURRENCE_BUDGET_MS", env.float, 20.0)
)
TICK_TIME_BUDGET_SECONDS = _positive(
    "TICK_TIME_BUDGET_SECONDS", _read("TICK_TIME_BUDGET_SECONDS", env.float, 40.0)
)
# Unset: a tick drains until nothing is due or its budget is spent.
TICK_MAX_ROWS = _read("TICK_MAX_ROWS", env.int, None)
if TICK_MAX_ROWS is not None:
    _positive("TICK_MAX_ROWS", TICK_MAX_ROWS)
# How long after an occurrence (or a job) was first due a provider's "later" (429, 503 with
# Retry-After) still defers it for free; past it, the answer counts as a failure.
BACKPRESSURE_MAX_DEFER_SECONDS = _positive(
    "BACKPRESSURE_MAX_DEFER_SECONDS", _read("BACKPRESSURE_MAX_DEFER_SECONDS", env.float, 86_400.0)
)
WEBHOOK_ENDPOINT_CONCURRENCY = int(
    _positive("WEBHOOK_ENDPOINT_CONCURRENCY", _read("WEBHOOK_ENDPOINT_CONCURRENCY", env.int, 4))
)
WEBHOOK_CIRCUIT_FAILURES = int(
    _positive("WEBHOOK_CIRCUIT_FAILURES", _read("WEBHOOK_CIRCUIT_FAILURES", env.int, 5))
)
if CLAIM_LEASE_SECONDS < CHANNEL_TIMEOUT_SECONDS + 5:
    raise ImproperlyConfigured(
        "CLAIM_LEASE_SECONDS must exceed CHANNEL_TIMEOUT_SECONDS by at least 5 seconds so a "
        "lease always covers a row's worst case"
    )

RESEND_API_KEY = _read("RESEND_API_KEY", env.str, "")
RESEND_API_URL = _read("RESEND_API_URL", env.str, "https://api.resend.com").rstrip("/")
# Requests per second to Resend across every tick process (Resend's default team limit).
RESEND_RATE_LIMIT = _positive("RESEND_RATE_LIMIT", _read("RESEND_RATE_LIMIT", env.float, 2.0))
NOTIFICATIONS_EMAIL_FROM = _read(
    "NOTIFICATIONS_EMAIL_FROM", env.str, "Tickwork <notifications@tickwork.invalid>"
)
EMAIL_BACKEND = _read("EMAIL_BACKEND", env.str, "django.core.mail.backends.console.EmailBackend")
WEBHOOK_ALLOW_PRIVATE_TARGETS = _flag("WEBHOOK_ALLOW_PRIVATE_TARGETS", False)
WEBHOOK_SECRET_GRACE_SECONDS = int(
    _positive(
        "WEBHOOK_SECRET_GRACE_SECONDS", _read("WEBHOOK_SECRET_GRACE_SECONDS", env.int, 86_400)
    )
)

# --- Jobs outbox (consume_jobs) ------------------------------------------------------------
JOB_MAX_ATTEMPTS = int(_positive("JOB_MAX_ATTEMPTS", _read("JOB_MAX_ATTEMPTS", env.int, 5)))
JOB_BACKOFF_SECONDS = _seconds_list("JOB_BACKOFF_SECONDS", "10,60,300,1800")
JOB_LEASE_SECONDS = _positive("JOB_LEASE_SECONDS", _read("JOB_LEASE_SECONDS", env.float, 60.0))
PROVISIONING_URL = _http_url("PROVISIONING_URL", "")
PROVISIONING_TIMEOUT_SECONDS = _positive(
    "PROVISIONING_TIMEOUT_SECONDS", _read("PROVISIONING_TIMEOUT_SECONDS", env.float, 10.0)
)

# --- Retention (prune) ---------------------------------------------------------------------
# 0 keeps nothing: `prune` refuses it without --yes rather than start-up refusing it.
RETENTION_DAYS = _not_negative("RETENTION_DAYS", _read("RETENTION_DAYS", env.int, 30))
JOB_RETENTION_DAYS = _not_negative(
    "JOB_RETENTION_DAYS", _read("JOB_RETENTION_DAYS", env.int, RETENTION_DAYS)
)
DELIVERY_RETENTION_DAYS = _not_negative(
    "DELIVERY_RETENTION_DAYS", _read("DELIVERY_RETENTION_DAYS", env.int, RETENTION_DAYS)
)
PRUNE_BATCH_SIZE = int(_positive("PRUNE_BATCH_SIZE", _read("PRUNE_BATCH_SIZE", env.int, 1000)))


# --- Front door: public signup and invitations (onboarding) -----------------------------
def _token_url(name: str, default: str) -> str:
    """A link template for an emailed token: an http(s) URL holding `{token}`."""
    url = _read(name, env.str, default)
    problem = _url_problem(url.replace("{token}", "t"))
    if problem or "{token}" not in url:
        raise ImproperlyConfigured(
            f"{name} must be an http(s) URL containing {{token}}, e.g. {default!r}"
        )
    return url


SIGNUP_ENABLED = _flag("SIGNUP_ENABLED", False)
SIGNUP_VERIFY_URL = _token_url(
    "SIGNUP_VERIFY_URL", "http://localhost:3000/signup/verify?token={token}"
)
SIGNUP_TOKEN_TTL_SECONDS = int(
    _positive("SIGNUP_TOKEN_TTL_SECONDS", _read("SIGNUP_TOKEN_TTL_SECONDS", env.int, 86_400))
)
SIGNUP_RATE_IP = _rate("SIGNUP_RATE_IP", "5/hour")
TURNSTILE_SECRET_KEY = _read("TURNSTILE_SECRET_KEY", env.str, "")
TURNSTILE_VERIFY_URL = _http_url(
    "TURNSTILE_VERIFY_URL", "https://challenges.cloudflare.com/turnstile/v0/siteverify"
)
# Host names a Turnstile challenge may have been solved on, beside ALLOWED_HOSTS (the front
# end's own host usually differs from the API's).
TURNSTILE_HOSTNAMES = _read("TURNSTILE_HOSTNAMES", env.list, [])
if SIGNUP_ENABLED and not TURNSTILE_SECRET_KEY and not DEBUG:
    raise ImproperlyConfigured(
        "TURNSTILE_SECRET_KEY must be set when SIGNUP_ENABLED=true (it may be omitted only "
        "with DEBUG=true)"
    )
INVITATION_ACCEPT_URL = _token_url(
    "INVITATION_ACCEPT_URL", "http://localhost:3000/invitations/accept?token={token}"
)
INVITATION_TTL_SECONDS = int(
    _positive("INVITATION_TTL_SECONDS", _read("INVITATION_TTL_SECONDS", env.int, 604_800))
)

# --- Observability (GET /metrics) ---------------------------------------------------------
METRICS_ENABLED = _flag("METRICS_ENABLED", False)
METRICS_TOKEN = _read("METRICS_TOKEN", env.str, "")

# Every record's URL query strings (often a webhook's secret) are redacted where the record
# is made, at every level and for every handler: urllib3 logs request lines at DEBUG.
install_log_redaction()
LOG_FORMAT = _read("LOG_FORMAT", env.str, "logfmt")
if LOG_FORMAT not in ("logfmt", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be logfmt or json, got {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "logfmt": {"()": "dbqueue.logfmt.LogfmtFormatter"},
        "json": {"()": "dbqueue.logfmt.JsonFormatter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT},
        "discard": {"class": "logging.NullHandler"},
    },
    "root": {"handlers": ["console"], "level": _read("LOG_LEVEL", env.str, "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # A request for a host not in ALLOWED_HOSTS already gets a 400; scanners send them
        # by the thousand, and a traceback each would bury the logs worth reading.
        "django.security.DisallowedHost": {"handlers": ["discard"], "propagate": False},
    },
}

SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = True
# TLS is usually terminated by a proxy in front of the app: these are the operator's call.
SECURE_SSL_REDIRECT = _flag("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = _read("SECURE_HSTS_SECONDS", env.int, 0)
if _flag("TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
if not DEBUG:
    SESSION_COOKIE_SECURE = _flag("SESSION_COOKIE_SECURE", True)
    CSRF_COOKIE_SECURE = _flag("CSRF_COOKIE_SECURE", True)
