"""Django's task framework on the jobs outbox: `TASKS = {"default": {"BACKEND":
"jobs.tasks.OutboxBackend"}}`.

A `@task` function's `enqueue()` inserts a job of kind `task` (one INSERT, in the caller's
transaction: rolled back, it never runs; committed, it runs once), and `consume_jobs` runs it
like any job: claimed under a lease and fenced, backed off and retried when it raises, dead-
lettered when its attempts are used up, woken by LISTEN on PostgreSQL. The task's
`queue_name` (`consume_jobs --queue`), `priority` and `run_after` become the job's queue,
claim order and first due time; its arguments and return value must be JSON.

`get_result()` maps the job's status onto Django's: pending is READY (new, or waiting for
its next attempt after a failed one: `errors` then lists what each failed attempt raised),
running is RUNNING, completed is SUCCESSFUL, dead-lettered is FAILED.

On Django 6 the backend is a `django.tasks` backend; on 5.2 one of the `django-tasks`
backport (`pip install tickwork[tasks]`), whose API is the same. The names this module
exports (`task`, `task_backends`, the exceptions) are those of the line in use.
"""

import logging
import traceback
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

import django
from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.utils import timezone
from django.utils.module_loading import import_string

if TYPE_CHECKING or django.VERSION >= (6, 0):
    from django.tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskError, task
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json
else:
    from django_tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import Task, TaskError, task
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started
    from django_tasks.utils import normalize_json

from outbound.categories import ErrorCategory
from outbound.redaction import redact_url_queries, safe_error_text

if TYPE_CHECKING:
    from jobs.models import Job

__all__ = [
    "InvalidTask",
    "OutboxBackend",
    "Task",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "task",
    "task_backends",
]

logger = logging.getLogger("jobs.consumer")

# How much of a failed task's traceback its attempt history keeps (the end: where it raised).
TRACEBACK_MAX = 4000

# Keyed by the job's stored status (`jobs.states.JobStatus`'s values).
_STATUS = {
    "pending": TaskResultStatus.READY,
    "running": TaskResultStatus.RUNNING,
    "completed": TaskResultStatus.SUCCESSFUL,
    "dead_lettered": TaskResultStatus.FAILED,
}


class OutboxBackend(BaseTaskBackend):
    """Tasks as jobs of the outbox (see the module docstring). OPTIONS: none."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        """Insert the task's job (one INSERT) and return its READY result. Raises
        InvalidTask for a task this backend cannot run and TypeError for arguments that
        are not JSON."""
        from jobs.services import job_enqueue_task

        self.validate_task(task)
        arguments: dict[str, Any] = normalize_json({"args": args, "kwargs": kwargs})  # type: ignore[assignment]
        job = job_enqueue_task(
            path=task.module_path,
            arguments=arguments,
            backend=self.alias,
            queue_name=task.queue_name,
            priority=task.priority,
            run_after=task.run_after,
            now=timezone.now(),
        )
        result = task_result(job, task)
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult:
        """The task's result as stored now; TaskResultDoesNotExist when no task has the id."""
        from jobs.models import TASK_KIND, Job

        try:
            job = Job.objects.get(pk=uuid.UUID(str(result_id)), kind=TASK_KIND)
        except (ValueError, Job.DoesNotExist) as exc:
            raise TaskResultDoesNotExist(result_id) from exc
        return task_result(job, stored_task(job))


def stored_task(job: "Job") -> Task:
    """The Task a task job runs: the `@task` its path names, with the job's queue,
    priority and run_after. Raises ImportError when the path names nothing and
    SuspiciousOperation when it names something that is not a task."""
    found = import_string(job.payload["task"])
    if not isinstance(found, Task):
        raise SuspiciousOperation(f"{job.payload['task']!r} is not a task")
    run_after = job.payload.get("run_after")
    return found.using(
        priority=job.priority,
        queue_name=job.queue_name,
        run_after=datetime.fromisoformat(run_after) if run_after else None,
        backend=job.payload.get("backend", found.backend),
    )


def task_result(job: "Job", task: Task) -> TaskResult:
    """The TaskResult of a task job, as the row says now (see the module docstring)."""
    history = job.attempt_history or []
    result: TaskResult = TaskResult(
        task=task,
        id=str(job.id),
        status=_STATUS[job.status],
        enqueued_at=job.created_at,
        started_at=_started_at(history, job.last_attempt_at),
        finished_at=_finished_at(job),
        last_attempted_at=job.last_attempt_at,
        args=job.payload["args"],
        kwargs=job.payload["kwargs"],
        backend=job.payload.get("backend", task.backend),
        errors=[
            TaskError(
                exception_class_path=entry["exception_class_path"], traceback=entry["traceback"]
            )
            for entry in history
            if entry.get("exception_class_path")
        ],
        # No worker writes its name on a job: one entry per attempt, so `attempts` counts.
        worker_ids=["consume_jobs"] * job.attempts,
    )
    object.__setattr__(result, "_return_value", job.return_value)
    return result


def _started_at(history: list[dict[str, Any]], last_attempt_at: datetime | None) -> datetime | None:
    """When the first attempt started: the oldest entry the history kept, else the one
    running now."""
    for entry in history:
        if entry.get("at"):
            return datetime.fromisoformat(entry["at"])
    return last_attempt_at


def _finished_at(job: "Job") -> datetime | None:
    if job.status == "completed":
        return job.completed_at
    if job.status == "dead_lettered":
        return job.updated_at
    return None


def _raised(exc: BaseException) -> tuple[str, str]:
    """What a failed attempt keeps of the exception: its class path and its traceback (the
    end of it), URL query strings redacted as in every log."""
    kind = type(exc)
    text = "".join(traceback.format_exception(exc))
    return f"{kind.__module__}.{kind.__qualname__}", redact_url_queries(text)[-TRACEBACK_MAX:]


def perform_task(job: "Job") -> None:
    """Run the task a job names and keep its return value on `job` (written back with its
    completion). What the task raises becomes a JobError carrying the exception (retried
    with backoff); a task that cannot be found, or returns a value that is not JSON, fails
    for good."""
    from jobs.registry import JobError

    try:
        task = stored_task(job)
    except (ImportError, SuspiciousOperation) as exc:
        raise JobError(
            f"no task at {job.payload['task']!r}",
            category=ErrorCategory.UNKNOWN_KIND,
            permanent=True,
            exception=_raised(exc),
        ) from exc
    result = task_result(job, task)
    args = job.payload["args"]
    if task.takes_context:
        args = [TaskContext(task_result=result), *args]
    task_started.send(type(task.get_backend()), task_result=result)
    try:
        value = task.call(*args, **job.payload["kwargs"])
    except Exception as exc:
        logger.warning("task %s (%s) raised %s", job.id, task.module_path, type(exc).__name__)
        raise JobError(
            safe_error_text(f"{type(exc).__name__}: {exc}"),
            category=ErrorCategory.INTERNAL,
            exception=_raised(exc),
        ) from exc
    try:
        job.return_value = normalize_json(value)
    except (TypeError, ValueError) as exc:
        raise JobError(
            f"the task returned {type(value).__name__}, which is not JSON",
            category=ErrorCategory.INTERNAL,
            permanent=True,
            exception=_raised(exc),
        ) from exc
    finished = task_result(job, task)
    object.__setattr__(finished, "status", TaskResultStatus.SUCCESSFUL)
    object.__setattr__(finished, "_return_value", job.return_value)
    task_finished.send(type(task.get_backend()), task_result=finished)


def _no_local_writes(*_: Any, **__: Any) -> None:
    """A task's return value is written by its completion itself; nothing else is local."""


def task_max_seconds() -> float:
    return float(settings.TASK_MAX_SECONDS)


def register_task_handler() -> None:
    """Make `consume_jobs` run task jobs (called from the jobs app's `ready()`)."""
    from jobs.models import TASK_KIND
    from jobs.registry import Handler, register

    register(
        TASK_KIND,
        Handler(
            perform=perform_task,
            apply=_no_local_writes,
            apply_many=_no_local_writes,
            max_seconds=task_max_seconds,
        ),
    )
