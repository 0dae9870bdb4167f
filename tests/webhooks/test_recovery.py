"""Recovering a webhook endpoint: POST /v1/webhook-endpoints/{id}/recover starts a task of the
jobs outbox that queues again, once and in creation order, every delivery to the endpoint
in the window that never succeeded; GET /v1/tasks/{id} follows it."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from dbqueue.clock import Clock
from delivery.models import Notification, NotificationState, WebhookEndpoint
from jobs.consumer import jobs_claim, jobs_drain
from jobs.models import Job, JobStatus
from jobs.registry import JobError
from tenancy.models import OperationKey
from tests.delivery.factories import make_endpoint, make_notification, make_notifications
from web.errors import InvalidInput
from webhooks import recovery
from webhooks.recovery import RECOVER_KIND, endpoint_recover, recover_chunk

URL = "https://hooks.example.com/tickwork"
DEAD = {"next_fire_at": None, "dead_letter_reason": "exhausted", "error_count": 3}


@pytest.fixture
def endpoint(alice):
    return make_endpoint(tenant=alice.tenant, url=URL)


def _dead(endpoint, count, *, created_at, **fields):
    return make_notifications(
        count, tenant=endpoint.tenant, endpoint=endpoint, created_at=created_at, **DEAD, **fields
    )


def _drain() -> None:
    jobs_drain(clock=Clock(), limit=10, max_seconds=30)


def test_recover_answers_202_with_a_task_the_tenant_follows(alice, charlie, endpoint):
    _dead(endpoint, 3, created_at=timezone.now() - timedelta(hours=2))
    since = (timezone.now() - timedelta(days=1)).isoformat()

    response = alice.client().post(
        f"/v1/webhook-endpoints/{endpoint.id}/recover", {"since": since}, format="json"
    )

    assert response.status_code == 202
    task_id = response.json()["task_id"]
    assert set(response.json()) == {"task_id"}
    assert response["Location"] == f"/v1/tasks/{task_id}"
    job = Job.objects.get(pk=task_id)
    assert (job.tenant, job.kind, job.status) == (alice.tenant, RECOVER_KIND, JobStatus.PENDING)
    task = alice.client().get(f"/v1/tasks/{task_id}").json()
    assert (task["id"], task["kind"], task["status"]) == (task_id, RECOVER_KIND, "pending")
    assert (task["total"], task["done"]) == (3, 0)
    assert charlie.client().get(f"/v1/tasks/{task_id}").status_code == 404

    _drain()

    task = alice.client().get(f"/v1/tasks/{task_id}").json()
    assert (task["status"], task["total"], task["done"]) == ("completed", 3, 3)
    assert task["completed_at"] is not None


def test_a_recover_with_an_idempotency_key_starts_one_task(alice, endpoint):
    _dead(endpoint, 2, created_at=timezone.now() - timedelta(hours=2))
    since = (timezone.now() - timedelta(days=1)).isoformat()
    path, key = f"/v1/webhook-endpoints/{endpoint.id}/recover", str(uuid.uuid4())

    first, replay = (
        alice.client().post(path, {"since": since}, format="json", headers={"Idempotency-Key": key})
        for _ in range(2)
    )

    assert first.status_code == replay.status_code == 202
    assert replay["Idempotent-Replayed"] == "true"
    assert replay.json() == first.json()
    assert Job.objects.filter(kind=RECOVER_KIND).count() == 1


def test_a_recover_key_reused_with_another_window_is_a_422_that_starts_nothing(alice, endpoint):
    _dead(endpoint, 2, created_at=timezone.now() - timedelta(hours=2))
    path, key = f"/v1/webhook-endpoints/{endpoint.id}/recover", str(uuid.uuid4())

    def recover(days):
        since = (timezone.now() - timedelta(days=days)).isoformat()
        return alice.client().post(
            path, {"since": since}, format="json", headers={"Idempotency-Key": key}
        )

    first, reused = recover(1), recover(2)

    assert first.status_code == 202
    assert reused.status_code == 422
    assert reused.json()["type"].endswith("/idempotency-key-reused")
    assert Job.objects.filter(kind=RECOVER_KIND).count() == 1


def test_a_job_that_is_no_task_is_not_a_task(alice):
    job = Job.objects.create(tenant=alice.tenant, kind="provision", max_attempts=3)

    assert alice.client().get(f"/v1/tasks/{job.id}").status_code == 404


def test_another_tenants_endpoint_answers_404_and_starts_nothing(charlie, endpoint):
    since = (timezone.now() - timedelta(days=1)).isoformat()

    response = charlie.client().post(
        f"/v1/webhook-endpoints/{endpoint.id}/recover", {"since": since}, format="json"
    )

    assert response.status_code == 404
    assert not Job.objects.exists()


def test_members_may_not_recover(bob, endpoint):
    since = (timezone.now() - timedelta(days=1)).isoformat()

    response = bob.client().post(
        f"/v1/webhook-endpoints/{endpoint.id}/recover", {"since": since}, format="json"
    )

    assert response.status_code == 403
    assert not Job.objects.exists()


def test_a_disabled_endpoint_is_a_409_that_starts_nothing_and_keeps_no_key(alice, endpoint):
    rows = _dead(endpoint, 2, created_at=timezone.now() - timedelta(hours=2))
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(enabled=False, disabled_reason="failing")
    since = (timezone.now() - timedelta(days=1)).isoformat()
    key = {"Idempotency-Key": str(uuid.uuid4())}

    def recover():
        return alice.client().post(
            f"/v1/webhook-endpoints/{endpoint.id}/recover",
            {"since": since},
            format="json",
            headers=key,
        )

    response = recover()

    assert response.status_code == 409
    assert response["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert problem["type"].endswith("/webhook-endpoint-disabled")
    assert (problem["title"], problem["status"]) == ("Webhook endpoint disabled", 409)
    assert "Enable it first" in problem["detail"]
    assert not Job.objects.exists()
    assert not OperationKey.objects.exists()
    assert set(Notification.objects.values_list("state", flat=True)) == {"dead_lettered"}
    # The refusal was not stored under the key: once enabled, the same request recovers.
    enabled = alice.client().patch(
        f"/v1/webhook-endpoints/{endpoint.id}", {"disabled": False}, format="json"
    )
    assert enabled.status_code == 200
    assert recover().status_code == 202
    assert Job.objects.get().payload["total"] == len(rows)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"since": "-15d"}, "since"),
        ({"since": "-1d", "until": "-2d"}, "since"),
        ({"since": "+1h"}, "since"),
        ({}, "since"),
        ({"since": "yesterday"}, "since"),
        ({"since": "-1d", "endpoint": "x"}, "endpoint"),
    ],
)
def test_a_bad_window_is_a_400_that_starts_nothing(alice, endpoint, body, field):
    now = timezone.now()
    offsets = {"-15d": -timedelta(days=15), "-1d": -timedelta(days=1)}
    offsets |= {"-2d": -timedelta(days=2), "+1h": timedelta(hours=1)}
    data = {
        key: (now + offsets[value]).isoformat() if value in offsets else value
        for key, value in body.items()
    }

    response = alice.client().post(
        f"/v1/webhook-endpoints/{endpoint.id}/recover", data, format="json"
    )

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert field in response.json()["errors"]
    assert not Job.objects.exists()


def test_only_deliveries_in_the_window_that_never_succeeded_are_queued_again(alice, endpoint):
    now = timezone.now()
    in_window = now - timedelta(hours=5)
    other = make_endpoint(tenant=alice.tenant, url=URL)
    dead = _dead(endpoint, 2, created_at=in_window)
    parked = make_notification(
        tenant=alice.tenant, endpoint=endpoint, next_fire_at=None, created_at=in_window
    )
    delivered = make_notification(
        tenant=alice.tenant,
        endpoint=endpoint,
        channels=["webhook", "email"],
        email_to=["a@example.com"],
        channel_state={"webhook": "delivered", "email": "failed"},
        created_at=in_window,
        **DEAD,
    )
    left_alone = [
        *_dead(endpoint, 1, created_at=now - timedelta(days=3)),  # before the window
        *_dead(other, 1, created_at=in_window),  # another endpoint
        make_notification(  # still on its way
            tenant=alice.tenant,
            endpoint=endpoint,
            next_fire_at=now,
            error_count=1,
            created_at=in_window,
        ),
        make_notification(  # recurring: goes on with its own schedule
            tenant=alice.tenant,
            endpoint=endpoint,
            rrule="FREQ=DAILY",
            created_at=in_window,
            **DEAD,
        ),
        delivered,
    ]
    before = {row.pk: (row.state, row.claim_token) for row in left_alone}

    task = endpoint_recover(
        tenant=alice.tenant, endpoint_id=endpoint.id, since=now - timedelta(days=1), now=now
    )
    _drain()

    task.refresh_from_db()
    assert task.status == JobStatus.COMPLETED
    assert (task.payload["total"], task.payload["done"], task.payload["queued"]) == (3, 3, 3)
    for row in [*dead, parked]:
        row.refresh_from_db()
        assert row.state == NotificationState.SCHEDULED
        assert (row.error_count, row.last_error, row.dead_letter_reason) == (0, None, "")
        assert row.next_fire_at is not None
    for row in Notification.objects.filter(pk__in=before):
        assert (row.state, row.claim_token) == before[row.pk]


def test_rows_are_due_in_creation_order(alice, endpoint, monkeypatch):
    monkeypatch.setattr(recovery, "CHUNK_SIZE", 2)
    base = timezone.now() - timedelta(hours=1)
    # Created out of id order, and two at the same instant.
    rows = [
        *_dead(endpoint, 1, created_at=base + timedelta(seconds=3)),
        *_dead(endpoint, 2, created_at=base + timedelta(seconds=1)),
        *_dead(endpoint, 1, created_at=base),
        *_dead(endpoint, 1, created_at=base + timedelta(seconds=2)),
    ]

    endpoint_recover(tenant=alice.tenant, endpoint_id=endpoint.id, since=base)
    _drain()

    by_due = list(
        Notification.objects.filter(pk__in=[row.pk for row in rows]).order_by("next_fire_at")
    )
    by_creation = sorted(by_due, key=lambda row: (row.created_at, row.pk))
    assert [row.pk for row in by_due] == [row.pk for row in by_creation]
    assert len({row.next_fire_at for row in by_due}) == len(rows)


def _claimed_task(alice, endpoint, *, since):
    endpoint_recover(tenant=alice.tenant, endpoint_id=endpoint.id, since=since)
    [job] = jobs_claim(now=timezone.now(), limit=1)
    return job


def test_a_resumed_task_never_queues_a_row_twice(alice, endpoint, monkeypatch):
    """A worker died after the first chunk; the rows it re-queued have failed again since.
    The next claimant starts after the cursor: those rows stay dead-lettered."""
    monkeypatch.setattr(recovery, "CHUNK_SIZE", 2)
    since = timezone.now() - timedelta(hours=1)
    rows = _dead(endpoint, 5, created_at=since + timedelta(minutes=1))
    job = _claimed_task(alice, endpoint, since=since)

    assert recover_chunk(job, now=timezone.now()) is True
    first = set(
        Notification.objects.filter(state=NotificationState.SCHEDULED).values_list("pk", flat=True)
    )
    assert len(first) == 2
    Notification.objects.filter(pk__in=first).update(**DEAD, state=NotificationState.DEAD_LETTERED)
    # The worker is gone; its lease runs out and another claimant takes the task.
    Job.objects.filter(pk=job.pk).update(claimed_until=timezone.now() - timedelta(seconds=1))
    [resumed] = jobs_claim(now=timezone.now() + timedelta(minutes=2), limit=1)
    assert resumed.payload["done"] == 2

    while recover_chunk(resumed, now=timezone.now()):
        pass

    states = dict(
        Notification.objects.filter(pk__in=[row.pk for row in rows]).values_list("pk", "state")
    )
    assert {pk for pk, state in states.items() if state == NotificationState.DEAD_LETTERED} == first
    assert resumed.payload["done"] == resumed.payload["total"] == 5
    assert resumed.payload["queued"] == 5


def test_a_chunk_whose_claim_was_lost_writes_nothing(alice, endpoint):
    since = timezone.now() - timedelta(hours=1)
    _dead(endpoint, 3, created_at=since + timedelta(minutes=1))
    job = _claimed_task(alice, endpoint, since=since)
    Job.objects.filter(pk=job.pk).update(claim_token=job.claim_token + 1)

    with pytest.raises(JobError):
        recover_chunk(job, now=timezone.now())

    assert not Notification.objects.filter(state=NotificationState.SCHEDULED).exists()
    assert Job.objects.get(pk=job.pk).payload["done"] == 0


def test_a_chunk_is_a_fixed_number_of_statements(alice, endpoint, django_assert_num_queries):
    since = timezone.now() - timedelta(hours=1)
    _dead(endpoint, 40, created_at=since + timedelta(minutes=1))
    job = _claimed_task(alice, endpoint, since=since)

    # Hold the endpoint enabled, select the chunk, re-queue it, advance the fenced cursor
    # (plus the savepoint pair of the test's transaction).
    with django_assert_num_queries(6):
        recover_chunk(job, now=timezone.now())

    assert job.payload["done"] == 40


def test_an_endpoint_disabled_after_the_task_started_stops_it_and_queues_nothing(alice, endpoint):
    since = timezone.now() - timedelta(hours=1)
    dead = _dead(endpoint, 3, created_at=since + timedelta(minutes=1))
    task = endpoint_recover(tenant=alice.tenant, endpoint_id=endpoint.pk, since=since)
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(enabled=False)

    _drain()

    task = alice.client().get(f"/v1/tasks/{task.pk}").json()
    assert (task["status"], task["done"]) == ("dead_lettered", 0)
    assert "endpoint was disabled" in task["last_error"]
    assert not Notification.objects.filter(
        pk__in=[row.pk for row in dead], next_fire_at__isnull=False
    ).exists()


def test_the_window_is_checked_by_the_service(alice, endpoint):
    now = timezone.now()
    with pytest.raises(InvalidInput):
        endpoint_recover(
            tenant=alice.tenant,
            endpoint_id=endpoint.id,
            since=now - timedelta(days=14, seconds=1),
            now=now,
        )
    task = endpoint_recover(
        tenant=alice.tenant, endpoint_id=endpoint.id, since=now - timedelta(days=14), now=now
    )
    assert task.payload["until"] == now.isoformat()
