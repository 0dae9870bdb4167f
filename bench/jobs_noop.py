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

        register(NOOP_KIND, Handler(perform=_nothing, apply=_nothing))
