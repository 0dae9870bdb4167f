"""A bad setting stops start-up with a message naming the variable."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def start(**overrides: str) -> subprocess.CompletedProcess:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "SECRET_KEY", "DEBUG", "TICK_LIMIT", "LOG_FORMAT"}
    }
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings", "SECRET_KEY": "s" * 50})
    env.update(overrides)
    env = {key: value for key, value in env.items() if value is not None}
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_good_settings_start():
    assert start(DATABASE_URL="sqlite:///:memory:").returncode == 0


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
        ({"METRICS_ENABLED": "perhaps"}, "METRICS_ENABLED"),
        ({"DEBUG": "ture"}, "DEBUG"),
    ],
)
def test_bad_settings_stop_start_up_naming_the_variable(overrides, variable):
    result = start(**overrides)

    assert result.returncode != 0
    assert variable in result.stderr


def test_missing_secret_key_is_allowed_only_in_debug():
    assert start(SECRET_KEY="", DEBUG="true").returncode == 0
