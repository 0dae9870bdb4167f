"""The backend contract of django-tasks' database backend (django-tasks-db's tests), ported
to OutboxBackend where it applies. What is not ported, and why:

- id_function options (custom, unknown, database expression): a task's id is its job's
  UUID; the backend takes no OPTIONS.
- the app check (`django_tasks_db` not installed): the jobs app is the product's own.
- the priority range check constraint: the range is checked at enqueue (validate_task).
- the EXPLAIN of the ready index: tests/dbqueue/test_claim.py holds the claim to
  job_ready_idx.
- run_after's NULL-to-date-max migration: a job's due time is never NULL while pending.
- db_worker's flags (interval, max tasks, worker id, backend, excluded queues) and its
  signal and process tests: consume_jobs has its own flags and loop, tested in
  test_consume_jobs_command.py and test_consume_jobs_loop.py, and the kill test is
  test_tasks_kill_pg.py.
- "doesn't process a different backend": consume_jobs runs the tasks of every alias that
  uses OutboxBackend (one outbox); the alias is kept for the result.
- select_for_update locking and SQLite exclusive transactions: a claim is one statement
  (tests/dbqueue/test_claim.py, tests/jobs/test_concurrency.py).
- pruning: completed tasks are pruned as jobs are (`prune`, JOB_RETENTION_DAYS).
- a task raising SystemExit or KeyboardInterrupt: they end the worker, which leaves the
  task to its lease like a killed worker (a job that does so on every attempt is dead-
  lettered as `crashed`).
- the admin's run_after display: the admin shows the job's columns.
"""

import logging
import uuid
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import SuspiciousOperation
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from dbqueue.clock import Clock
from jobs.consumer import jobs_drain
from jobs.models import TASK_KIND, Job, JobStatus
from jobs.services import job_enqueue_task
from jobs.tasks import (
    InvalidTask,
    OutboxBackend,
    TaskResultDoesNotExist,
    TaskResultStatus,
    stored_task,
    task_backends,
)
from tests.jobs import task_functions as tasks

pytestmark = pytest.mark.django_db

if OutboxBackend.__mro__[1].__module__.startswith("django.tasks"):
    from django.tasks.signals import logger as tasks_logger
    from django.tasks.signals import task_enqueued
else:
    from django_tasks.signals import logger as tasks_logger
    from django_tasks.signals import task_enqueued


@pytest.fixture(autouse=True)
def _settings(settings):
    settings.PROVISIONING_URL = ""
    # django-tasks-db runs a task once: one attempt makes a failure final here too.
    settings.JOB_MAX_ATTEMPTS = 1


def backend():
    return task_backends["default"]


def run_worker(*, now=None):
    return jobs_drain(clock=Clock(now=now or timezone.now()), limit=100, max_seconds=60)


@pytest.fixture
def enqueued_signals():
    received = []

    def listen(sender, task_result, **kwargs):
        received.append((sender, task_result))

    task_enqueued.connect(listen)
    yield received
    task_enqueued.disconnect(listen)


def test_using_correct_backend():
    assert isinstance(backend(), OutboxBackend)
    assert (backend().alias, backend().options) == ("default", {})


@pytest.mark.parametrize("task", [tasks.noop, tasks.noop_async])
def test_enqueue_task(task, enqueued_signals, django_assert_num_queries):
    with django_assert_num_queries(1):
        result = task.enqueue(1, two=3)

    assert uuid.UUID(result.id).version == 4
    assert result.status == TaskResultStatus.READY
    assert not result.is_finished
    assert (result.started_at, result.last_attempted_at, result.finished_at) == (None,) * 3
    with pytest.raises(ValueError, match="Task has not finished yet"):
        result.return_value  # noqa: B018
    assert result.task == task
    assert (result.args, result.kwargs) == ([1], {"two": 3})
    assert result.attempts == 0
    assert enqueued_signals == [(OutboxBackend, result)]


@pytest.mark.parametrize("task", [tasks.noop, tasks.noop_async])
def test_enqueue_task_async(task, enqueued_signals):
    result = async_to_sync(task.aenqueue)()

    assert result.status == TaskResultStatus.READY
    assert (result.args, result.kwargs, result.attempts) == ([], {}, 0)
    assert Job.objects.filter(pk=result.id, kind=TASK_KIND).exists()
    assert enqueued_signals == [(OutboxBackend, result)]


def test_get_result(django_assert_num_queries):
    with django_assert_num_queries(1):
        result = backend().enqueue(tasks.noop, [], {})
    with django_assert_num_queries(1):
        again = backend().get_result(result.id)

    assert again == result
    assert async_to_sync(backend().aget_result)(result.id) == result


def test_a_result_keeps_its_run_after():
    result = tasks.noop.using(run_after=timezone.now() + timedelta(hours=1)).enqueue()

    assert backend().get_result(result.id) == result


def test_refresh_result(django_assert_num_queries):
    result = backend().enqueue(tasks.calculate_meaning_of_life, (), {})
    now = timezone.now()
    Job.objects.filter(pk=result.id).update(
        status=JobStatus.COMPLETED, attempts=1, last_attempt_at=now, completed_at=now,
        return_value=42,
    )  # fmt: skip
    assert (result.status, result.attempts, result.finished_at) == (
        TaskResultStatus.READY,
        0,
        None,
    )

    with django_assert_num_queries(1):
        result.refresh()

    assert result.started_at is not None
    assert result.last_attempted_at is not None
    assert result.finished_at is not None
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.is_finished
    assert (result.return_value, result.attempts) == (42, 1)


def test_get_missing_result_and_invalid_uuid():
    for result_id in (str(uuid.uuid4()), "123"):
        with pytest.raises(TaskResultDoesNotExist):
            backend().get_result(result_id)
        with pytest.raises(TaskResultDoesNotExist):
            async_to_sync(backend().aget_result)(result_id)


def _job_naming(path: str) -> Job:
    return job_enqueue_task(
        path=path,
        arguments={"args": [["exit", "1"]], "kwargs": {}},
        backend="default",
        queue_name="default",
        priority=0,
        now=timezone.now(),
    )


def test_invalid_and_missing_task_path():
    with pytest.raises(SuspiciousOperation, match="is not a task"):
        stored_task(_job_naming("subprocess.check_output"))
    with pytest.raises(ImportError):
        stored_task(_job_naming("missing.func"))


@pytest.mark.django_db(transaction=True)
def test_doesnt_wait_until_transaction_commit():
    def count_in_new_connection() -> int:
        other = connection.copy()
        try:
            with other.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM jobs_job WHERE kind = %s", [TASK_KIND])
                return cursor.fetchone()[0]
        finally:
            other.close()

    with transaction.atomic():
        result = tasks.noop.enqueue()
        assert result.enqueued_at is not None
        assert Job.objects.filter(kind=TASK_KIND).count() == 1
        # SQLite locks the database for this transaction.
        if connection.vendor == "postgresql":
            assert count_in_new_connection() == 0

    assert count_in_new_connection() == 1


def test_enqueue_logs(caplog):
    with caplog.at_level(logging.DEBUG, logger=tasks_logger.name):
        result = tasks.noop.enqueue()

    [record] = [r for r in caplog.records if "enqueued" in r.getMessage()]
    assert result.id in record.getMessage()


def test_validate_on_enqueue():
    with override_settings(
        TASKS={"default": {"BACKEND": "jobs.tasks.OutboxBackend", "QUEUES": ["unknown_queue"]}}
    ):
        custom_queue = tasks.noop.using(queue_name="unknown_queue")

    with pytest.raises(InvalidTask, match="Queue 'unknown_queue' is not valid for backend"):
        custom_queue.enqueue()


def test_run_enqueued_task():
    result = tasks.calculate_meaning_of_life.enqueue()

    run_worker()
    result.refresh()

    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.started_at >= result.enqueued_at
    assert result.finished_at >= result.started_at
    assert result.return_value == 42
    assert result.attempts == 1


def test_batch_processes_all_tasks_and_then_none():
    for _ in range(3):
        tasks.noop.enqueue()

    assert run_worker().completed == 3
    assert run_worker().claimed == 0


def test_failing_task():
    result = tasks.failing_with_value_error.enqueue()

    run_worker()
    result.refresh()

    assert result.status == TaskResultStatus.FAILED
    assert result.started_at >= result.enqueued_at
    assert result.finished_at >= result.started_at
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018
    assert result.errors[0].exception_class is ValueError
    assert result.errors[0].traceback.endswith("ValueError: This task failed due to ValueError\n")
    assert not Job.objects.ready(now=timezone.now()).exists()


def test_complex_exception():
    result = tasks.complex_exception.enqueue()

    run_worker()
    result.refresh()

    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class is ValueError
    assert "This task failed" in result.errors[0].traceback


def test_complex_return_value():
    result = tasks.returns_a_set.enqueue()

    run_worker()
    result.refresh()

    assert result.status == TaskResultStatus.FAILED
    assert result._return_value is None
    assert result.errors[0].exception_class is TypeError
    assert "Unsupported type" in result.errors[0].traceback


def test_run_after():
    now = timezone.now()
    result = tasks.noop.using(run_after=now + timedelta(hours=1)).enqueue()

    assert run_worker(now=now).claimed == 0
    assert backend().get_result(result.id).status == TaskResultStatus.READY
    assert run_worker(now=now + timedelta(hours=1)).completed == 1
    assert backend().get_result(result.id).status == TaskResultStatus.SUCCESSFUL


def test_run_after_priority():
    now = timezone.now()

    def at(hours: float, priority: int = 0) -> str:
        return (
            tasks.noop.using(priority=priority, run_after=now + timedelta(hours=hours)).enqueue().id
        )

    old, very_old = at(-2, 20), at(-10, 20)
    at(10), at(10, 10), at(2)  # not due
    high, low, lower = (tasks.noop.using(priority=p).enqueue().id for p in (10, 2, -2))

    order: list[str] = []
    done = Job.objects.filter(kind=TASK_KIND, status=JobStatus.COMPLETED)
    while jobs_drain(clock=Clock(now=now + timedelta(seconds=1)), limit=1, max_seconds=60).claimed:
        [new] = set(done.values_list("pk", flat=True)) - {uuid.UUID(pk) for pk in order}
        order.append(str(new))

    assert order == [very_old, old, high, low, lower]


def test_invalid_task_path_fails_in_the_worker():
    job = _job_naming("tests.jobs.task_functions.not_a_task")

    run_worker()
    result = Job.objects.get(pk=job.pk)

    assert result.status == JobStatus.DEAD_LETTERED
    assert "SuspiciousOperation" in result.attempt_history[-1]["traceback"]


def test_missing_task_path_fails_in_the_worker():
    job = _job_naming("tests.jobs.task_functions.some_test")

    run_worker()
    result = Job.objects.get(pk=job.pk)

    assert result.status == JobStatus.DEAD_LETTERED
    assert "ImportError" in result.attempt_history[-1]["traceback"]


def test_takes_context():
    result = tasks.own_id.enqueue()

    run_worker()
    result.refresh()

    assert result.return_value == result.id
