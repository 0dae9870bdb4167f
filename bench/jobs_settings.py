"""Bench-only settings: the production settings plus a `noop` job kind (bench/jobs_noop.py),
so the consumer's own cost can be measured apart from any real handler's."""

from config.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "bench.jobs_noop.NoopJobConfig"]  # noqa: F405
