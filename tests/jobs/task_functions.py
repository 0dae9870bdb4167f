"""`@task` functions the task tests enqueue: tasks must be module-level functions. Each run
is recorded as a row (`TaskRun`-like: a tenant named after the call), so a test, or a
worker in another process, can count the runs in the database."""

import time

from jobs.tasks import task
from tenancy.models import Tenant

RUN_PREFIX = "task-run:"


def runs(label: str) -> int:
    """How many times a task recorded `label` as run."""
    return Tenant.objects.filter(name=f"{RUN_PREFIX}{label}").count()


def _record(label: str) -> None:
    Tenant.objects.create(name=f"{RUN_PREFIX}{label}")


@task
def add(a: int, b: int) -> int:
    return a + b


@task
def record(label: str) -> str:
    _record(label)
    return label


@task
def fail(label: str) -> None:
    _record(label)
    raise ValueError(f"{label} failed on purpose")


@task
def returns_a_set() -> object:
    return {1, 2}


@task(takes_context=True)
def attempt_number(context, label: str) -> int:
    _record(label)
    return context.attempt


@task
def noop(*args: object, **kwargs: object) -> None:
    return None


@task
def record_then_hang(label: str) -> None:
    """Records its run, then waits to be killed (the kill test); its second run, after the
    first worker was killed, finishes."""
    _record(label)
    if runs(label) == 1:
        time.sleep(3600)


@task
async def noop_async(*args: object, **kwargs: object) -> None:
    return None


@task
def calculate_meaning_of_life() -> int:
    return 42


@task
def failing_with_value_error() -> None:
    raise ValueError("This task failed due to ValueError")


@task
def complex_exception() -> None:
    raise ValueError(ValueError("This task failed"))


@task(takes_context=True)
def own_id(context) -> str:
    return context.task_result.id


def not_a_task() -> None:
    """A plain function: a job naming it must not run it."""
