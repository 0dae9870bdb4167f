"""Worker processes for the fault tests: real `manage.py` children on this test's PostgreSQL
database, their summary lines, and the database-side faults (terminating their sessions)."""

import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from typing import IO

from django.db import connection
from django.utils import timezone

from tests.support.processes import ROOT, subprocess_env


@dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: str
    stderr: str
    seconds: float  # from start to exit, Python start-up included

    def summary(self, event: str = "run_tick") -> dict[str, float]:
        """The one `event=<event> key=value …` line of stdout, as numbers."""
        [line] = [line for line in self.stdout.splitlines() if line.startswith(f"event={event} ")]
        pairs = (part.split("=", 1) for part in line.split()[1:])
        return {key: float(value) if "." in value else int(value) for key, value in pairs}


class Worker:
    """A `manage.py <args>` child process. Its output goes to files, so a chatty child never
    blocks on a full pipe while the test is busy elsewhere. `app` becomes the session's
    application_name, which is how a test finds its database backend."""

    def __init__(self, *args: str, app: str, env: dict[str, str] | None = None) -> None:
        child_env = subprocess_env()
        child_env["DATABASE_URL"] += f"?application_name={app}"
        child_env.update(env or {})
        self.app = app
        # Both files live as long as the child; close() closes them.
        self._out: IO[str] = tempfile.TemporaryFile("w+")  # noqa: SIM115
        self._err: IO[str] = tempfile.TemporaryFile("w+")  # noqa: SIM115
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=child_env,
            stdout=self._out,
            stderr=self._err,
            text=True,
        )

    def finish(self, *, timeout: float) -> Finished:
        """Wait (bounded) for the child to exit and collect what it printed."""
        returncode = self.process.wait(timeout=timeout)
        seconds = time.monotonic() - self.started
        self._out.seek(0)
        self._err.seek(0)
        return Finished(returncode, self._out.read(), self._err.read(), seconds)

    def kill(self) -> None:
        """SIGKILL (a stopped child too), then reap it."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)

    def close(self) -> None:
        """Kill the child if a test left it running, and drop its output files."""
        self.kill()
        self._out.close()
        self._err.close()


def wait_until(condition, *, timeout: float, interval: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"condition not met within {timeout}s"
        time.sleep(interval)


def wait_past(moment: datetime, *, timeout: float) -> None:
    """Sleep until the wall clock is past `moment` (a real lease expiry, never a rewrite of
    claimed_until); bounded by `timeout`."""
    wait_until(lambda: timezone.now() > moment, timeout=timeout, interval=0.1)


def terminate_backends(app: str) -> int:
    """pg_terminate_backend on every session of this database named `app` (never this
    test's own); returns how many were terminated."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s"
            " AND pid <> pg_backend_pid()",
            [app],
        )
        return cursor.fetchone()[0]
