"""Django's `@task` on the jobs outbox (jobs.tasks.OutboxBackend): enqueue is one INSERT in
the caller's transaction, consume_jobs runs it with the jobs queue's backoff and dead
letters, get_result reads each state, priority, run_after and queue_name are honoured."""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import transaction
from django.utils import timezone

from dbqueue.clock import Clock
from jobs.consumer import jobs_claim, jobs_drain
from jobs.models import TASK_KIND, Job, JobStatus
from jobs.stats import job_queue_stats
from jobs.tasks import (
    InvalidTask,
    OutboxBackend,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
)
from tests.jobs import task_functions as tasks
from tests.jobs.task_functions import runs

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _settings(settings):
    settings.PROVISIONING_URL = ""
    settings.JOB_BACKOFF_SECONDS = [10, 60]
    settings.JOB_MAX_ATTEMPTS = 2


def drain(*, now=None, queue_name=None, limit=100):
    return jobs_drain(
        clock=Clock(now=now or timezone.now()), limit=limit, max_seconds=60, queue_name=queue_name
    )


def test_the_product_runs_tasks_on_the_outbox():
    assert isinstance(task_backends["default"], OutboxBackend)


def test_enqueue_is_one_insert_in_the_callers_transaction(django_assert_num_queries):
    with transaction.atomic(), django_assert_num_queries(1) as captured:
        result = tasks.add.enqueue(2, 3)

    assert captured.captured_queries[0]["sql"].startswith("INSERT INTO")
    job = Job.objects.get(pk=result.id)
    assert (job.kind, job.status, job.tenant_id) == (TASK_KIND, JobStatus.PENDING, None)
    assert job.payload == {
        "task": "tests.jobs.task_functions.add",
        "backend": "default",
        "args": [2, 3],
        "kwargs": {},
    }
    assert result.status == TaskResultStatus.READY
    assert (result.args, result.kwargs) == ([2, 3], {})


def test_a_rolled_back_enqueue_never_runs():
    with pytest.raises(RuntimeError), transaction.atomic():
        tasks.record.enqueue("rolled-back")
        raise RuntimeError("the request failed")

    summary = drain()

    assert summary.claimed == 0
    assert not Job.objects.filter(kind=TASK_KIND).exists()
    assert runs("rolled-back") == 0


def test_a_committed_enqueue_runs_exactly_once():
    with transaction.atomic():
        result = tasks.record.enqueue("committed")

    first, second = drain(), drain()

    assert (first.completed, second.claimed) == (1, 0)
    assert runs("committed") == 1
    done = tasks.record.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == "committed"
    assert done.errors == []
    assert done.attempts == 1
    assert done.finished_at is not None


def test_the_consume_jobs_command_runs_tasks():
    result = tasks.add.enqueue(20, 22)
    out = io.StringIO()

    call_command("consume_jobs", "--once", stdout=out)

    assert "claimed=1 completed=1" in out.getvalue()
    result.refresh()
    assert result.return_value == 42


def test_get_result_reads_each_state():
    result = tasks.fail.enqueue("states")
    assert task_backends["default"].get_result(result.id).status == TaskResultStatus.READY

    now = timezone.now()
    [claimed] = jobs_claim(now=now, limit=1)
    running = task_backends["default"].get_result(result.id)
    assert running.status == TaskResultStatus.RUNNING
    assert running.last_attempted_at == claimed.last_attempt_at
    with pytest.raises(ValueError, match="not finished"):
        running.return_value  # noqa: B018

    # Released unrun, as a stopping worker gives a claimed job back.
    Job.objects.filter(pk=claimed.pk).update(
        status=JobStatus.PENDING, attempts=0, next_attempt_at=now, claimed_until=None
    )
    drain(now=now)
    retrying = task_backends["default"].get_result(result.id)
    assert retrying.status == TaskResultStatus.READY
    [error] = retrying.errors
    assert error.exception_class_path == "builtins.ValueError"
    assert error.exception_class is ValueError
    assert "states failed on purpose" in error.traceback

    drain(now=now + timedelta(seconds=11))
    failed = task_backends["default"].get_result(result.id)
    assert failed.status == TaskResultStatus.FAILED
    assert len(failed.errors) == 2
    assert failed.is_finished
    with pytest.raises(ValueError, match="failed"):
        failed.return_value  # noqa: B018


def test_a_failing_task_backs_off_then_is_dead_lettered():
    result = tasks.fail.enqueue("backoff")
    now = timezone.now()

    first = drain(now=now)
    early = drain(now=now + timedelta(seconds=9))
    second = drain(now=now + timedelta(seconds=10))

    assert (first.backed_off, early.claimed, second.dead_lettered) == (1, 0, 1)
    assert runs("backoff") == 2
    job = Job.objects.get(pk=result.id)
    assert job.status == JobStatus.DEAD_LETTERED
    assert job.last_error_category == "internal"
    assert job.last_error == "ValueError: backoff failed on purpose"
    assert [entry["outcome"] for entry in job.attempt_history] == ["backed_off", "dead_lettered"]


def test_a_dead_lettered_task_can_be_retried_like_a_job():
    from jobs.services import job_retry

    result = tasks.fail.enqueue("retried")
    now = timezone.now()
    drain(now=now)
    drain(now=now + timedelta(seconds=10))

    job_retry(tenant=None, job_id=Job.objects.get(pk=result.id).pk, now=now)

    assert task_backends["default"].get_result(result.id).status == TaskResultStatus.READY
    drain(now=now)
    assert runs("retried") == 3


def test_a_return_value_that_is_not_json_fails_the_task_for_good():
    result = tasks.returns_a_set.enqueue()

    summary = drain()

    assert summary.dead_lettered == 1
    failed = task_backends["default"].get_result(result.id)
    assert failed.status == TaskResultStatus.FAILED
    assert failed.errors[0].exception_class_path == "builtins.TypeError"


def test_arguments_must_be_json_and_are_checked_at_enqueue():
    with pytest.raises(TypeError):
        tasks.add.enqueue({1, 2}, 3)

    assert not Job.objects.exists()


def test_a_task_that_is_gone_fails_for_good():
    result = tasks.add.enqueue(1, 2)
    Job.objects.filter(pk=result.id).update(
        payload={"task": "tests.jobs.task_functions.gone", "args": [], "kwargs": {}}
    )

    assert drain().dead_lettered == 1
    job = Job.objects.get(pk=result.id)
    assert job.last_error_category == "unknown_kind"


def test_a_task_taking_its_context_sees_its_attempt():
    result = tasks.attempt_number.enqueue("context")

    drain()

    assert tasks.attempt_number.get_result(result.id).return_value == 1


def test_higher_priority_runs_first():
    low = tasks.record.using(priority=-10).enqueue("low")
    high = tasks.record.using(priority=50).enqueue("high")

    drain(limit=1)

    assert task_backends["default"].get_result(high.id).status == TaskResultStatus.SUCCESSFUL
    assert task_backends["default"].get_result(low.id).status == TaskResultStatus.READY
    assert Job.objects.get(pk=high.id).priority == 50


def test_run_after_defers_the_first_run():
    now = timezone.now()
    later = tasks.record.using(run_after=now + timedelta(minutes=5)).enqueue("later")

    assert drain(now=now).claimed == 0
    assert drain(now=now + timedelta(minutes=5)).completed == 1
    assert task_backends["default"].get_result(later.id).status == TaskResultStatus.SUCCESSFUL


def test_consume_jobs_queue_runs_only_that_queue(settings):
    settings.TASKS = {
        "default": {"BACKEND": "jobs.tasks.OutboxBackend", "QUEUES": ["default", "emails"]}
    }
    email = tasks.record.using(queue_name="emails").enqueue("email")
    other = tasks.record.enqueue("other")
    out = io.StringIO()

    call_command("consume_jobs", "--once", "--queue", "emails", stdout=out)

    assert "claimed=1 completed=1" in out.getvalue()
    assert task_backends["default"].get_result(email.id).status == TaskResultStatus.SUCCESSFUL
    assert task_backends["default"].get_result(other.id).status == TaskResultStatus.READY


def test_a_queue_the_backend_does_not_name_is_refused():
    with pytest.raises(InvalidTask):
        tasks.record.using(queue_name="nowhere")


def test_get_result_of_an_unknown_id_or_of_a_job_that_is_no_task(alice):
    from tests.jobs.factories import make_job

    job = make_job(alice.tenant)

    for result_id in ("not-a-uuid", "00000000-0000-0000-0000-000000000000", str(job.id)):
        with pytest.raises(TaskResultDoesNotExist):
            task_backends["default"].get_result(result_id)


def test_tasks_count_in_the_queue_figures_like_jobs():
    tasks.noop.enqueue()
    tasks.noop.enqueue()

    assert job_queue_stats(now=timezone.now())["pending"] == 2
