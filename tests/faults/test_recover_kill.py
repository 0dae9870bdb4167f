"""A consumer killed with SIGKILL in the middle of an endpoint's recovery: the chunks it
committed stay committed with the task's cursor, the chunk in hand is rolled back, and the
next consumer resumes after the cursor. Every row is queued again exactly once, even the
rows the killed consumer re-queued that have failed again since."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from delivery.models import Notification, NotificationState
from jobs.models import Job, JobStatus
from tests.conftest import requires_postgres
from tests.delivery.factories import make_endpoint, make_tenant, notification_fields
from tests.faults.workers import terminate_backends, wait_past, wait_until
from webhooks.recovery import CHUNK_SIZE, endpoint_recover

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True), pytest.mark.fault]

ROWS = 4 * CHUNK_SIZE
# A row of the third chunk: held locked, it stops the consumer after two chunks.
HELD = 2 * CHUNK_SIZE + CHUNK_SIZE // 2
LEASE = 3
ENV = {"JOB_LEASE_SECONDS": str(LEASE)}
DEAD = {"next_fire_at": None, "dead_letter_reason": "exhausted", "error_count": 3}


def test_sigkilled_recovery_queues_every_row_exactly_once(workers, report):
    tenant = make_tenant()
    endpoint = make_endpoint(tenant=tenant, url="https://hooks.example.com/in")
    since = timezone.now() - timedelta(hours=1)
    rows = Notification.objects.bulk_create(
        Notification(
            **notification_fields(
                tenant=tenant, endpoint=endpoint, created_at=since + timedelta(seconds=i), **DEAD
            )
        )
        for i in range(ROWS)
    )
    task = endpoint_recover(tenant=tenant, endpoint_id=endpoint.id, since=since)

    def done() -> int:
        return Job.objects.get(pk=task.pk).payload["done"]

    with transaction.atomic():
        Notification.objects.select_for_update().filter(pk=rows[HELD].pk).get()
        killed = workers("consume_jobs", app="fault_recover_a", env=ENV)
        wait_until(lambda: done() == 2 * CHUNK_SIZE, timeout=60)
        killed.kill()
        terminate_backends("fault_recover_a")

    scheduled = Notification.objects.filter(state=NotificationState.SCHEDULED)
    first = set(scheduled.values_list("pk", flat=True))
    at_kill = Job.objects.get(pk=task.pk)
    # The rows the killed consumer queued fail again before anyone resumes the task.
    scheduled.update(state=NotificationState.DEAD_LETTERED, **DEAD)

    wait_past(at_kill.claimed_until, timeout=LEASE + 10)
    resumed = workers("consume_jobs", app="fault_recover_b", env=ENV).finish(timeout=60)

    task.refresh_from_db()
    states = dict(Notification.objects.values_list("pk", "state"))
    requeued = {pk for pk, state in states.items() if state == NotificationState.SCHEDULED}
    report(
        "recover_kill",
        rows=ROWS,
        done_at_kill=at_kill.payload["done"],
        resumed_seconds=resumed.seconds,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert (at_kill.status, at_kill.payload["done"]) == (JobStatus.RUNNING, 2 * CHUNK_SIZE)
    assert first == {row.pk for row in rows[: 2 * CHUNK_SIZE]}
    assert task.status == JobStatus.COMPLETED
    assert task.payload["done"] == task.payload["total"] == task.payload["queued"] == ROWS
    # Queued once each: the killed consumer's rows were not queued a second time.
    assert requeued == {row.pk for row in rows[2 * CHUNK_SIZE :]}
    assert requeued.isdisjoint(first)
