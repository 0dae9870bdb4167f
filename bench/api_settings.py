"""Bench-only settings: the production settings plus a bare insert view to compare against."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "bench.api_urls"
