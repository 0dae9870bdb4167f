"""Migrated SQLite files for tests that start real processes (the demo, gunicorn workers,
a consumer) on a database file of their own: one `manage.py migrate` per test process, and
a copy of its file for each test, instead of seconds of migrations in every such test."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.processes import ROOT


def migrated_file(path: Path) -> Path:
    """`path`, a new SQLite file with every migration applied by `manage.py migrate`."""
    env = {**os.environ, "DEBUG": "true", "DATABASE_URL": f"sqlite:///{path}"}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=300,
    )
    return path


def copy_of(migrated: Path, path: Path) -> Path:
    """`path`, a copy of the migrated file: a database a test's processes may change."""
    return Path(shutil.copyfile(migrated, path))
