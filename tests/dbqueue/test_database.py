"""dbqueue.database: which database errors mean the session is gone, and the worker's line."""

import sqlite3

import psycopg
import pytest
from django.db import IntegrityError, OperationalError

from dbqueue.database import connection_lost, database_error_line


def django_error(cause: Exception, kind: type[Exception] = OperationalError) -> Exception:
    error = kind(str(cause))
    error.__cause__ = cause
    return error


@pytest.mark.parametrize(
    "cause",
    [
        psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
        psycopg.errors.CrashShutdown("terminating connection because of crash"),
        psycopg.errors.CannotConnectNow("the database system is starting up"),
        psycopg.errors.ConnectionFailure("connection failure"),
        psycopg.OperationalError("server closed the connection unexpectedly"),
        psycopg.OperationalError("connection failed: Connection refused"),
    ],
)
def test_a_session_that_ended_or_never_opened_is_a_lost_connection(cause):
    assert connection_lost(django_error(cause))
    assert connection_lost(cause)


@pytest.mark.parametrize(
    "error",
    [
        django_error(psycopg.errors.SerializationFailure("could not serialize access")),
        django_error(psycopg.errors.QueryCanceled("canceling statement due to timeout")),
        django_error(psycopg.errors.UniqueViolation("duplicate key"), IntegrityError),
        django_error(sqlite3.OperationalError("database is locked")),
        OperationalError("no cause"),
    ],
)
def test_a_failed_statement_is_not_a_lost_connection(error):
    assert not connection_lost(error)


def test_the_error_line_is_one_line_that_says_what_happened():
    lost = django_error(
        psycopg.errors.AdminShutdown(
            "terminating connection due to administrator command\nserver closed the connection"
        )
    )
    locked = django_error(sqlite3.OperationalError("database is locked"))

    assert database_error_line("run_tick", lost) == (
        "run_tick: cannot reach the database (terminating connection due to administrator command)"
    )
    assert database_error_line("consume_jobs", locked) == (
        "consume_jobs: database error (database is locked)"
    )
