"""The demo's process tests start on a copy of the test process's migrated SQLite file, so
the demo starts without migrating (the newcomer's first run, on a fresh file, keeps tests of
its own in test_demo_paste.py)."""

from pathlib import Path

import pytest

from tests.support.demo import DATABASE
from tests.support.sqlite_files import copy_of


@pytest.fixture
def demo_database(tmp_path, migrated_sqlite) -> Path:
    """A migrated database where a demo started in `tmp_path` looks for its own."""
    return copy_of(migrated_sqlite, tmp_path / DATABASE)
