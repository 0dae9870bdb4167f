"""A job kind that does nothing, registered only under bench/jobs_settings.py."""

from datetime import datetime
from typing import Any

from django.apps import AppConfig

NOOP_KIND = "noop"


def _nothing(job: Any, *, now: datetime | None = None) -> None:
    return None


class NoopJobConfig(AppConfig):
    name = "bench.jobs_noop"
    label = "bench_jobs_noop"

    def ready(self) -> None:
        from jobs.registry import Handler, register

        handler = Handler(
            perform=_nothing, apply=_nothing, apply_many=_nothing, max_seconds=lambda: 0.1
        )
        register(NOOP_KIND, handler)
