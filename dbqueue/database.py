"""How the workers tell a lost database connection from a statement that failed, and the
one line they print when they stop because of it.

The error itself has to tell: after a transaction fails because its session is gone,
Django closes the connection and quietly opens a new one, so the connection's state no
longer shows what happened."""

import psycopg

# SQLSTATEs that end the session: connection exceptions (class 08), administrator or
# crash shutdown, cannot connect now, idle session timeout, idle-in-transaction timeout.
_SESSION_ENDED = ("08", "57P01", "57P02", "57P03", "57P05", "25P03")


def connection_lost(exc: BaseException) -> bool:
    """True when `exc` (a django.db error or psycopg's) means the database session is gone
    or could not be opened, False when only the statement failed (a constraint, a
    deadlock, a cancelled query; SQLite's errors are always statement errors)."""
    cause = exc if isinstance(exc, psycopg.Error) else exc.__cause__
    if not isinstance(cause, psycopg.Error):
        return False
    if cause.sqlstate is None:
        # Raised by the client, not the server: the link itself failed.
        return isinstance(cause, psycopg.OperationalError)
    return cause.sqlstate.startswith(_SESSION_ENDED)


def database_error_line(command: str, exc: BaseException) -> str:
    """`<command>: cannot reach the database (<first line of the error>)` when the session
    is gone or could not be opened, or `<command>: database error (…)` for a statement
    that failed."""
    detail = next(iter(str(exc).strip().splitlines()), "") or type(exc).__name__
    what = "cannot reach the database" if connection_lost(exc) else "database error"
    return f"{command}: {what} ({detail})"
