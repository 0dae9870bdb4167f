"""A bad setting stops start-up with a message naming the variable."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from outbound import mailers
from tests.conftest import runs_without_the_pass_database

# Every process here gets a DATABASE_URL of its own (or none).
pytestmark = runs_without_the_pass_database

ROOT = Path(__file__).resolve().parent.parent


def start(**overrides: str) -> subprocess.CompletedProcess:
    return run([sys.executable, "-c", "import django; django.setup()"], **overrides)


def manage(*args: str, **overrides: str) -> subprocess.CompletedProcess:
    return run([sys.executable, "manage.py", *args], **overrides)


def run(command: list[str], **overrides: str) -> subprocess.CompletedProcess:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "SECRET_KEY", "DEBUG", "TICK_LIMIT", "LOG_FORMAT"}
    }
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings", "SECRET_KEY": "s" * 50})
    env.update(overrides)
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


_PG = "postgres://postgres@127.0.0.1:5432/tickwork"


def test_good_settings_start():
    assert start(DATABASE_URL="sqlite:///:memory:").returncode == 0


@pytest.mark.parametrize(
    "issuer", ["https://login.example.com", "https://login.example.com/", "http://127.0.0.1:9999"]
)
def test_an_identity_provider_with_its_audience_starts(issuer):
    result = start(DATABASE_URL="sqlite:///:memory:", OIDC_ISSUER=issuer, OIDC_AUDIENCE="api")

    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("overrides", "variable"),
    [
        ({"DATABASE_URL": "mysql://x"}, "DATABASE_URL"),
        ({"DATABASE_URL": "nonsense"}, "DATABASE_URL"),
        ({"SECRET_KEY": ""}, "SECRET_KEY"),
        ({"TICK_LIMIT": "many"}, "TICK_LIMIT"),
        ({"TICK_LIMIT": "0"}, "TICK_LIMIT"),
        ({"LOG_FORMAT": "xml"}, "LOG_FORMAT"),
        ({"PRUNE_BATCH_SIZE": "0"}, "PRUNE_BATCH_SIZE"),
        ({"RETENTION_DAYS": "-1"}, "RETENTION_DAYS"),
        ({"DELIVERY_RETENTION_DAYS": "-1"}, "DELIVERY_RETENTION_DAYS"),
        ({"METRICS_ENABLED": "perhaps"}, "METRICS_ENABLED"),
        ({"DEBUG": "ture"}, "DEBUG"),
        ({"RECURRENCE_BUDGET_MS": "0"}, "RECURRENCE_BUDGET_MS"),
        ({"RECURRENCE_BUDGET_MS": "fast"}, "RECURRENCE_BUDGET_MS"),
        ({"THROTTLE_RATE_USER": "600"}, "THROTTLE_RATE_USER"),
        ({"THROTTLE_RATE_ANON": "60/fortnight"}, "THROTTLE_RATE_ANON"),
        ({"THROTTLE_RATE_AUTH_FAILURES": "0/min"}, "THROTTLE_RATE_AUTH_FAILURES"),
        ({"THROTTLE_RATE_AUTH_FAILURES": "²/min"}, "THROTTLE_RATE_AUTH_FAILURES"),
        ({"TRUSTED_PROXY_COUNT": "-1"}, "TRUSTED_PROXY_COUNT"),
        ({"TRUSTED_PROXY_COUNT": "one"}, "TRUSTED_PROXY_COUNT"),
        ({"OIDC_ISSUER": "https://login.example.com"}, "OIDC_AUDIENCE"),
        ({"OIDC_AUDIENCE": "tickwork"}, "OIDC_ISSUER"),
        ({"OIDC_ISSUER": "ftp://login.example.com", "OIDC_AUDIENCE": "a"}, "OIDC_ISSUER"),
        ({"OIDC_ISSUER": "http://login.example.com", "OIDC_AUDIENCE": "a"}, "OIDC_ISSUER"),
        ({"OIDC_ISSUER": "https://u:p@login.example.com", "OIDC_AUDIENCE": "a"}, "OIDC_ISSUER"),
        ({"DATABASE_REPLICA_URLS": "postgres://h/db"}, "DATABASE_REPLICA_URLS"),  # on SQLite
        (
            {"DATABASE_URL": _PG, "DATABASE_REPLICA_URLS": "mysql://h/db"},
            "DATABASE_REPLICA_URLS",
        ),
        ({"DATABASE_URL": _PG, "DATABASE_REPLICA_URLS": "postgres://h"}, "DATABASE_REPLICA_URLS"),
        (
            {"DATABASE_URL": _PG, "DATABASE_REPLICA_URLS": "postgres://h/db,sqlite:///x"},
            "DATABASE_REPLICA_URLS",
        ),
        ({"DATABASE_URL": _PG, "REPLICA_MAX_LAG_SECONDS": "0"}, "REPLICA_MAX_LAG_SECONDS"),
        ({"DATABASE_URL": _PG, "DATABASE_LISTEN_URL": "pgbouncer:6432"}, "DATABASE_LISTEN_URL"),
        ({"SIGNUP_RATE_IP": "5/week"}, "SIGNUP_RATE_IP"),
        ({"SIGNUP_TOKEN_TTL_SECONDS": "0"}, "SIGNUP_TOKEN_TTL_SECONDS"),
        ({"INVITATION_TTL_SECONDS": "-5"}, "INVITATION_TTL_SECONDS"),
        ({"SIGNUP_VERIFY_URL": "https://app.example.com/verify"}, "SIGNUP_VERIFY_URL"),
        ({"INVITATION_ACCEPT_URL": "app.example.com/join?t={token}"}, "INVITATION_ACCEPT_URL"),
        ({"TURNSTILE_VERIFY_URL": "ftp://challenges.example.com"}, "TURNSTILE_VERIFY_URL"),
        ({"SIGNUP_ENABLED": "sure"}, "SIGNUP_ENABLED"),
    ],
)
def test_bad_settings_stop_start_up_naming_the_variable(overrides, variable):
    result = start(**overrides)

    assert result.returncode != 0
    assert variable in result.stderr


def test_replicas_and_a_listen_url_start_as_database_aliases():
    result = run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); from django.conf import settings; "
            "print(sorted(settings.DATABASES))",
        ],
        DATABASE_URL=_PG,
        DATABASE_REPLICA_URLS=" postgres://r1/tickwork, postgres://r2:5433/tickwork ",
        DATABASE_LISTEN_URL=_PG,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['default', 'listen', 'replica_0', 'replica_1']"


@pytest.mark.parametrize(
    "url",
    [
        "provisioning.internal/v1",
        "ftp://provisioning.internal/v1",
        "https:///v1",
        "https://provisioning.internal:99999/v1",
        "https://provisioning.internal:0/v1",
        "https://provisioning.internal:port/v1",
        "https://provisioning internal/v1",
        "https://[::1/v1",
        "https://user:pass@provisioning.internal/v1",
    ],
)
def test_a_malformed_provisioning_url_stops_start_up_naming_it(url):
    result = manage("queue_status", DATABASE_URL="sqlite:///:memory:", PROVISIONING_URL=url)

    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("Error: PROVISIONING_URL ")


@pytest.mark.parametrize("url", ["", "http://10.0.0.5:8080/provision", "https://prov.example.com"])
def test_a_well_formed_or_empty_provisioning_url_starts(url):
    assert start(DATABASE_URL="sqlite:///:memory:", PROVISIONING_URL=url).returncode == 0


def test_missing_secret_key_is_allowed_only_in_debug():
    assert start(SECRET_KEY="", DEBUG="true").returncode == 0


def test_the_boolean_message_lists_every_accepted_form():
    result = start(DEBUG="maybe")

    assert "true/false, 1/0, yes/no, on/off" in result.stderr


@pytest.mark.parametrize(
    "command", [("run_tick",), ("consume_jobs", "--once"), ("queue_status",), ("migrate",)]
)
def test_every_command_reports_a_missing_secret_key_in_one_line(command):
    result = manage(*command, SECRET_KEY="", DATABASE_URL="sqlite:///:memory:")

    assert result.returncode == 1
    assert result.stderr == (
        "Error: SECRET_KEY must be set (it may be omitted only with DEBUG=true)\n"
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"DEBUG": "maybe"}, "Error: DEBUG must be one of true/false, 1/0, yes/no, on/off"),
        ({"TICK_LIMIT": "many"}, "Error: TICK_LIMIT is invalid"),
        ({"DATABASE_URL": "mysql://x"}, "Error: DATABASE_URL"),
    ],
)
def test_a_malformed_setting_is_one_line_naming_it(overrides, message):
    result = manage("queue_status", **{"DATABASE_URL": "sqlite:///:memory:", **overrides})

    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith(message)


def database_options(**overrides: str) -> subprocess.CompletedProcess:
    script = "from django.conf import settings; print(settings.DATABASES['default']['OPTIONS'])"
    return run([sys.executable, "-c", f"import django; django.setup(); {script}"], **overrides)


def test_postgresql_prepares_hot_statements_unless_turned_off_for_a_pooler():
    url = "postgres://app@db.internal:5432/app"

    default = database_options(DATABASE_URL=url)
    off = database_options(DATABASE_URL=url, DATABASE_PREPARED_STATEMENTS="false")

    assert "'server_side_binding': True, 'prepare_threshold': 2" in default.stdout
    assert "server_side_binding" not in off.stdout
    assert "prepare_threshold" not in off.stdout


@pytest.mark.parametrize("command", [("check",), ("run_tick",), ("queue_status",)])
def test_signup_without_a_turnstile_secret_stops_every_command_in_one_line(command):
    result = manage(*command, SIGNUP_ENABLED="true", DATABASE_URL="sqlite:///:memory:")

    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("Error: TURNSTILE_SECRET_KEY must be set when SIGNUP_ENABLED=true")


def test_signup_without_a_turnstile_secret_starts_in_debug_or_with_one():
    assert start(SIGNUP_ENABLED="true", DEBUG="true").returncode == 0
    assert start(SIGNUP_ENABLED="true", TURNSTILE_SECRET_KEY="0x4AAA-secret").returncode == 0


# Start-up with EMAIL_BACKEND set, the SMTP backend built from it, and what Django said about
# e-mail meanwhile (Django 6.1 warns of EMAIL_BACKEND and the EMAIL_* settings at start-up).
_EMAIL_AT_START_UP = """
import json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import django
    django.setup()
    from django.conf import settings
    from outbound import mailers
    mailer = mailers.default_mailer(timeout=2)
print(json.dumps({
    "backend": mailers.backend_path(),
    "built": f"{type(mailer).__module__}.{type(mailer).__qualname__}",
    "relay": [mailer.host, mailer.port, mailer.timeout],
    "set": [name for name in ("EMAIL_BACKEND", "MAILERS") if settings.is_overridden(name)],
    "deprecations": [
        str(entry.message) for entry in caught
        if issubclass(entry.category, (DeprecationWarning, PendingDeprecationWarning))
        and "mail" in str(entry.message).lower()
    ],
}))
"""


def test_email_backend_becomes_the_setting_the_running_django_wants_without_a_deprecation():
    smtp = "django.core.mail.backends.smtp.EmailBackend"
    result = run(
        [sys.executable, "-c", _EMAIL_AT_START_UP],
        DATABASE_URL="sqlite:///:memory:",
        EMAIL_BACKEND=smtp,
    )

    assert result.returncode == 0, result.stderr
    started = json.loads(result.stdout)
    assert (started["backend"], started["built"]) == (smtp, smtp)
    assert started["relay"] == ["localhost", 25, 2]
    assert started["set"] == (["MAILERS"] if mailers.USES_MAILERS else ["EMAIL_BACKEND"])
    assert started["deprecations"] == []
