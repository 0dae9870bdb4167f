"""The demo's tests share one migrated SQLite file per test process: each test's demo
starts on a copy of it, so it starts without migrating (the newcomer's first run, on a fresh
file, keeps tests of its own in test_demo_paste.py)."""

from pathlib import Path

import pytest

from tests.support.demo import copy_database, migrated_database


@pytest.fixture(scope="session")
def migrated_demo_database(tmp_path_factory) -> Path:
    return migrated_database(tmp_path_factory.mktemp("migrated-demo"))


@pytest.fixture
def demo_database(tmp_path, migrated_demo_database) -> Path:
    """A migrated database where a demo started in `tmp_path` looks for its own."""
    return copy_database(migrated_demo_database, tmp_path)
