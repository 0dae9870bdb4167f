"""The no-op `@task` bench/tasks.py drains, once on each backend."""

from jobs.tasks import task


@task
def noop() -> None:
    return None


@task(backend="db")
def noop_db() -> None:
    return None
