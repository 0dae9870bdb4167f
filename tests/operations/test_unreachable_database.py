"""Every command says in one line that it cannot reach the database, with no traceback, and
a DATABASE_URL that is not a URL of a known scheme stops start-up with one line that does
not echo it."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import runs_without_the_pass_database

# Every command here gets a DATABASE_URL of its own: a closed port, or no known scheme.
pytestmark = runs_without_the_pass_database

ROOT = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again once the probe is


def _manage(*args: str, database_url: str) -> subprocess.CompletedProcess:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DATABASE_", "DJANGO_"))
    }
    env.update({"DEBUG": "true", "DATABASE_URL": database_url})
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "command",
    [
        ["queue_status"],
        ["queue_status", "--json"],
        ["prune", "--dry-run"],
        ["run_tick"],
        ["consume_jobs", "--once"],
    ],
    ids=" ".join,
)
def test_a_command_says_in_one_line_that_it_cannot_reach_the_database(command):
    url = f"postgres://tickwork@127.0.0.1:{_closed_port()}/tickwork"

    result = _manage(*command, database_url=url)

    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    assert "lost" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert f"{command[0]}: cannot reach the database (" in line, line
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("garbage", "got no URL scheme"),
        ("mysql://user:s3cret@db.example.com/app", "got a mysql:// URL"),
    ],
)
def test_a_database_url_of_no_known_scheme_is_one_line_that_does_not_echo_it(url, said):
    result = _manage("check", database_url=url)

    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"Error: DATABASE_URL must be a sqlite:/// or postgres:// URL, {said}"
    )
    assert "s3cret" not in result.stderr and "arbage" not in result.stderr
