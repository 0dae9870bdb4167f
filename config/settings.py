"""Tickwork settings: configured from the environment (and an optional `.env`).

Every variable is read through config.environment's `read`, so a malformed value stops
start-up with `ImproperlyConfigured` naming the variable instead of failing later in a
worker; config.databases turns the database URLs into Django databases. This module holds
the settings of the web app and takes the queues' workers' from config.worker_settings.
"""

import warnings
from pathlib import Path
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from config.databases import (
    configured_database,
    database_url,
    postgres_url,
    replica_databases,
)
from config.environment import env, flag, http_url, origins, positive, rate, read, token_url

# The workers' settings are settings too: Django reads only this module.
from config.worker_settings import *  # noqa: F403
from outbound.redaction import install_log_redaction

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = flag("DEBUG", False)
SECRET_KEY = read("SECRET_KEY", env.str, "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set (it may be omitted only with DEBUG=true)"
        )
    SECRET_KEY = "insecure-development-key-never-used-in-production"  # noqa: S105
# Earlier keys, still accepted while a rotation of SECRET_KEY settles (web.sealed too).
SECRET_KEY_FALLBACKS = read("SECRET_KEY_FALLBACKS", env.list, [])

ALLOWED_HOSTS = read("ALLOWED_HOSTS", env.list, ["localhost", "127.0.0.1", "[::1]", "testserver"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "corsheaders",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "dbtools",
    "dbqueue",
    "tenancy",
    "projects",
    "jobs",
    "delivery",
    "notifications",
    "webhooks",
    "people",
    "onboarding",
    "operations",
]

# Django's task framework (`@task`; django.tasks, or the django-tasks backport on 5.2) runs
# on the jobs outbox: an enqueue commits with the caller's transaction, consume_jobs runs it.
TASKS = {"default": {"BACKEND": "jobs.tasks.OutboxBackend"}}

MIDDLEWARE = [
    # Before everything: a preflight is answered before authentication, and every answer to
    # an allowed origin (a 401, a 413 or a 429 too) carries its CORS headers.
    "corsheaders.middleware.CorsMiddleware",
    # Outermost: every /v1/ answer, a refused one too, carries its Tickwork-Bookmark.
    "dbtools.bookmarks.BookmarkMiddleware",
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


DATABASES = {"default": configured_database(database_url(f"sqlite:///{BASE_DIR / 'db.sqlite3'}"))}

# --- Read replicas and the LISTEN connection (README: Scale) -------------------------------
# API reads go to a healthy replica (dbtools.replicas, dbtools.bookmarks); under a test
# runner each replica mirrors the test database instead of being created.
REPLICA_MAX_LAG_SECONDS = positive(
    "REPLICA_MAX_LAG_SECONDS", read("REPLICA_MAX_LAG_SECONDS", env.float, 30.0)
)


DATABASES.update(replica_databases(DATABASES["default"]))
DATABASE_ROUTERS = ["dbtools.replicas.ReplicaRouter"]
# consume_jobs --loop LISTENs on this direct connection (never through DATABASE_URL, which
# may be a transaction pooler that cannot keep a LISTEN); unset, the worker polls.
DATABASE_LISTEN_URL = read("DATABASE_LISTEN_URL", env.str, "").strip()
if DATABASE_LISTEN_URL:
    DATABASES["listen"] = postgres_url("DATABASE_LISTEN_URL", DATABASE_LISTEN_URL)
    DATABASES["listen"]["TEST"] = {"MIRROR": "default"}
# --- end of read replicas -------------------------------------------------------------------
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
# One date format on every admin page (config/formats/en), as the queue-health page writes it.
FORMAT_MODULE_PATH = "config.formats"
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
    positive("MAX_REQUEST_BYTES", read("MAX_REQUEST_BYTES", env.int, 1_048_576))
)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BYTES


# Counted in the database every web worker shares (tenancy.api.throttling, dbtools.ratelimit).
THROTTLE_RATE_USER = rate("THROTTLE_RATE_USER", "600/min")
THROTTLE_RATE_ANON = rate("THROTTLE_RATE_ANON", "60/min")
THROTTLE_RATE_AUTH_FAILURES = rate("THROTTLE_RATE_AUTH_FAILURES", "30/min")
# The name of the plan (tenancy.models.Plan) of every tenant without one of its own; empty:
# such tenants are unlimited. A name no plan has is read as unlimited too (and logged).
DEFAULT_PLAN = read("DEFAULT_PLAN", env.str, "").strip()
# Proxies in front of the app that append the address they saw to X-Forwarded-For; 0 (the
# default) means the header is never read and REMOTE_ADDR is the client's address.
TRUSTED_PROXY_COUNT = read("TRUSTED_PROXY_COUNT", env.int, 0)
if TRUSTED_PROXY_COUNT < 0:
    raise ImproperlyConfigured(f"TRUSTED_PROXY_COUNT must be 0 or more, got {TRUSTED_PROXY_COUNT}")

REST_FRAMEWORK = {
    # A portal session's `tkp_` token first (it passes any other bearer on), then API tokens.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "webhooks.portal.access.PortalTokenAuthentication",
        "tenancy.api.authentication.BearerTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["tenancy.api.permissions.IsTenantMember"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["web.parsers.StrictJSONParser"],
    "DEFAULT_FILTER_BACKENDS": ["web.query.KnownQueryParameters"],
    "DEFAULT_THROTTLE_CLASSES": [
        "tenancy.api.throttling.AddressRateThrottle",
        "tenancy.api.throttling.UserRateThrottle",
    ],
    "EXCEPTION_HANDLER": "web.problems.problem_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "tenancy.api.schema.TickworkAutoSchema",
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
    # Enums several components share keep the one name each had when one component used it.
    "ENUM_NAME_OVERRIDES": {
        "JobStatusEnum": "jobs.states.JobStatus",
        "OutcomeEnum": "delivery.models.DeliveryOutcome",
        "LastErrorCategoryEnum": "outbound.categories.ERROR_CATEGORY_CHOICES",
    },
}

# --- CORS: a browser front end on another origin (README: Signing in and sessions) ----------------
# Empty (the default): no CORS header at all. No cookies are used, so none are allowed.
CORS_ALLOWED_ORIGINS = origins("CORS_ALLOWED_ORIGINS")
CORS_ALLOW_CREDENTIALS = False
CORS_ALLOW_METHODS = ("GET", "POST", "PATCH", "PUT", "DELETE")
CORS_ALLOW_HEADERS = (
    "authorization",
    "content-type",
    "idempotency-key",
    "x-tenant-id",
    "tickwork-bookmark",
    "tickwork-consistency",
)
CORS_EXPOSE_HEADERS = ("Location", "Retry-After", "Idempotent-Replayed", "Tickwork-Bookmark")
CORS_PREFLIGHT_MAX_AGE = 600

# --- Idempotency -------------------------------------------------------------------------
IDEMPOTENCY_KEY_TTL_SECONDS = int(
    positive("IDEMPOTENCY_KEY_TTL_SECONDS", read("IDEMPOTENCY_KEY_TTL_SECONDS", env.int, 86_400))
)

# --- External identity provider (OIDC bearer JWTs) -----------------------------------------
# Both or neither: with them, a bearer that is a JWT is checked against the issuer's keys
# (tenancy.api.oidc). The issuer is the operator's choice, so its host is not vetted like a
# tenant's webhook target; it must be https unless it is this machine (a local stand-in).
OIDC_ISSUER = http_url("OIDC_ISSUER", "").rstrip("/")
OIDC_AUDIENCE = read("OIDC_AUDIENCE", env.str, "")
if bool(OIDC_ISSUER) != bool(OIDC_AUDIENCE):
    raise ImproperlyConfigured("OIDC_ISSUER and OIDC_AUDIENCE must be set together, or neither")
_OIDC_LOCAL = urlsplit(OIDC_ISSUER).hostname in ("127.0.0.1", "localhost", "::1")
if OIDC_ISSUER and urlsplit(OIDC_ISSUER).scheme != "https" and not (DEBUG or _OIDC_LOCAL):
    raise ImproperlyConfigured("OIDC_ISSUER must be an https URL, e.g. https://login.example.com")

# --- Front door: public signup and invitations (onboarding) -----------------------------


SIGNUP_ENABLED = flag("SIGNUP_ENABLED", False)
SIGNUP_VERIFY_URL = token_url(
    "SIGNUP_VERIFY_URL", "http://localhost:3000/signup/verify?token={token}"
)
SIGNUP_TOKEN_TTL_SECONDS = int(
    positive("SIGNUP_TOKEN_TTL_SECONDS", read("SIGNUP_TOKEN_TTL_SECONDS", env.int, 86_400))
)
SIGNUP_RATE_IP = rate("SIGNUP_RATE_IP", "5/hour")
TURNSTILE_SECRET_KEY = read("TURNSTILE_SECRET_KEY", env.str, "")
TURNSTILE_VERIFY_URL = http_url(
    "TURNSTILE_VERIFY_URL", "https://challenges.cloudflare.com/turnstile/v0/siteverify"
)
# Host names a Turnstile challenge may have been solved on, beside ALLOWED_HOSTS (the front
# end's own host usually differs from the API's).
TURNSTILE_HOSTNAMES = read("TURNSTILE_HOSTNAMES", env.list, [])
if SIGNUP_ENABLED and not TURNSTILE_SECRET_KEY and not DEBUG:
    raise ImproperlyConfigured(
        "TURNSTILE_SECRET_KEY must be set when SIGNUP_ENABLED=true (it may be omitted only "
        "with DEBUG=true)"
    )
INVITATION_ACCEPT_URL = token_url(
    "INVITATION_ACCEPT_URL", "http://localhost:3000/invitations/accept?token={token}"
)
INVITATION_TTL_SECONDS = int(
    positive("INVITATION_TTL_SECONDS", read("INVITATION_TTL_SECONDS", env.int, 604_800))
)

# --- Sending to people (README: Sending to people) ---------------------------------------
# One-click unsubscribe links (RFC 8058): the public API's POST /v1/unsubscribe/{token}.
UNSUBSCRIBE_URL = token_url("UNSUBSCRIBE_URL", "http://localhost:8000/v1/unsubscribe/{token}")
# Categories whose notifications ignore recipients' opt-outs and carry no unsubscribe link.
CRITICAL_CATEGORIES = [c.strip() for c in read("CRITICAL_CATEGORIES", env.list, []) if c.strip()]

# --- Signing in and sessions (README: Signing in and sessions) ------------------------------------
SIGNIN_URL = token_url("SIGNIN_URL", "http://localhost:3000/signin/verify?token={token}")
SIGNIN_RATE_IP = rate("SIGNIN_RATE_IP", "10/hour")
# Session tokens (signin, signup verify, an anonymous invitation accept) end this long after
# they are handed out; API tokens (POST /v1/tokens) live as long as their maker says.
SESSION_TTL_SECONDS = int(
    positive("SESSION_TTL_SECONDS", read("SESSION_TTL_SECONDS", env.int, 7 * 86_400))
)

# --- The customers' portal (README: Webhooks for your customers) -------------------------
# The link a portal session hands out: the page this app serves at /portal/, the token in
# the fragment (never sent to a server). Set it to the public address of this API.
PORTAL_URL = token_url("PORTAL_URL", "http://localhost:8000/portal/#token={token}")
# Who may embed the portal page in a frame: a CSP source list (`'self'`, origins, `'none'`).
PORTAL_FRAME_ANCESTORS = read("PORTAL_FRAME_ANCESTORS", env.str, "'self'").strip()
if not PORTAL_FRAME_ANCESTORS or any(char in PORTAL_FRAME_ANCESTORS for char in ";,\r\n"):
    raise ImproperlyConfigured(
        "PORTAL_FRAME_ANCESTORS must be a space-separated CSP source list, e.g. "
        "\"'self' https://app.example.com\""
    )

# --- Observability (GET /metrics) ---------------------------------------------------------
METRICS_ENABLED = flag("METRICS_ENABLED", False)
METRICS_TOKEN = read("METRICS_TOKEN", env.str, "")

# Every record's URL query strings (often a webhook's secret) are redacted where the record
# is made, at every level and for every handler: urllib3 logs request lines at DEBUG.
install_log_redaction()
LOG_FORMAT = read("LOG_FORMAT", env.str, "logfmt")
if LOG_FORMAT not in ("logfmt", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be logfmt or json, got {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "logfmt": {"()": "dbtools.logfmt.LogfmtFormatter"},
        "json": {"()": "dbtools.logfmt.JsonFormatter"},
    },
    "filters": {"server_errors_only": {"()": "dbtools.logfmt.ServerErrorsOnly"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT},
        "discard": {"class": "logging.NullHandler"},
    },
    "root": {"handlers": ["console"], "level": read("LOG_LEVEL", env.str, "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # Each request is one line of the access log; django.request adds the 5xx only.
        "django.request": {"filters": ["server_errors_only"]},
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
SECURE_SSL_REDIRECT = flag("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = read("SECURE_HSTS_SECONDS", env.int, 0)
if flag("TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
if not DEBUG:
    SESSION_COOKIE_SECURE = flag("SESSION_COOKIE_SECURE", True)
    CSRF_COOKIE_SECURE = flag("CSRF_COOKIE_SECURE", True)
