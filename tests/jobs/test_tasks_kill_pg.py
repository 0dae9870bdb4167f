"""A consume_jobs worker SIGKILLed in the middle of a Django task: the task is left
running under its lease, runs again once the lease has expired — once, with the same
id — and its result then reads SUCCESSFUL after two attempts."""

import pytest

from jobs.models import Job, JobStatus
from jobs.tasks import TaskResultStatus, task_backends
from tests.conftest import requires_postgres
from tests.faults.workers import Worker, terminate_backends, wait_past, wait_until
from tests.jobs import task_functions as tasks
from tests.jobs.task_functions import runs

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True), pytest.mark.fault]

LEASE = 3
ENV = {"JOB_LEASE_SECONDS": str(LEASE), "PROVISIONING_URL": ""}


def test_a_task_whose_worker_is_killed_runs_again_after_its_lease_once_with_the_same_id():
    result = tasks.record_then_hang.enqueue("killed")
    killed = Worker("consume_jobs", "--loop", app="task_kill_a", env=ENV)
    try:
        wait_until(lambda: runs("killed") == 1, timeout=60)
        killed.kill()
        terminate_backends("task_kill_a")
    finally:
        killed.close()
    at_kill = Job.objects.get(pk=result.id)

    wait_past(at_kill.claimed_until, timeout=LEASE + 10)
    again = Worker("consume_jobs", "--once", app="task_kill_b", env=ENV)
    try:
        resumed = again.finish(timeout=60)
    finally:
        again.close()
    after = Worker("consume_jobs", "--once", app="task_kill_c", env=ENV)
    try:
        idle = after.finish(timeout=60)
    finally:
        after.close()

    assert (resumed.returncode, idle.returncode) == (0, 0), resumed.stderr + idle.stderr
    assert (at_kill.status, at_kill.attempts) == (JobStatus.RUNNING, 1)
    assert resumed.summary("consume_jobs")["completed"] == 1
    assert idle.summary("consume_jobs")["claimed"] == 0
    assert runs("killed") == 2
    done = task_backends["default"].get_result(result.id)
    assert (done.id, done.status, done.attempts) == (result.id, TaskResultStatus.SUCCESSFUL, 2)
    assert Job.objects.filter(kind="task").count() == 1
