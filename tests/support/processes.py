"""Helpers of the tests that run real processes against the test database: where the
checkout is, the environment a `manage.py` child needs, and polling for a condition."""

import os
import time
from pathlib import Path

import psycopg
from django.db import OperationalError, connection

ROOT = Path(__file__).resolve().parents[2]


def session_ended() -> OperationalError:
    """What Django raises when the server terminated the session (pg_terminate_backend)."""
    message = "terminating connection due to administrator command\nserver closed the connection"
    error = OperationalError(message)
    error.__cause__ = psycopg.errors.AdminShutdown(message)
    return error


def fail_with(error: Exception):
    def fail(*args, **kwargs):
        raise error

    return fail


def subprocess_env() -> dict[str, str]:
    """The environment of a tick process using this test's PostgreSQL database."""
    settings_dict = connection.settings_dict
    url = (
        f"postgres://{settings_dict['USER']}@{settings_dict['HOST'] or '127.0.0.1'}:"
        f"{settings_dict['PORT'] or 5432}/{settings_dict['NAME']}"
    )
    return {
        **os.environ,
        "DATABASE_URL": url,
        "WEBHOOK_ALLOW_PRIVATE_TARGETS": "true",
        "SECRET_KEY": "test-only-secret-key-not-for-production",
    }


def wait_until(condition, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)
