"""Both queues filled with one row of every kind their figures count (or leave out)."""

from datetime import timedelta
from typing import Any

from delivery.models import Notification
from jobs.models import JobStatus
from tests.delivery.factories import state_of
from tests.jobs.factories import NOW, make_job


def make_notification(tenant, **fields) -> Notification:
    values: dict[str, Any] = {
        "channels": ["email"],
        "email_to": ["ann@example.com"],
        "next_fire_at": NOW,
    }
    values.update(fields)
    values.setdefault(
        "state",
        state_of(
            next_fire_at=values["next_fire_at"],
            error_count=values.get("error_count", 0),
            dead_letter_reason=values.get("dead_letter_reason", ""),
            max_attempts=3,
        ),
    )
    return Notification.objects.create(tenant=tenant, **values)


def fill_queues(tenant, *, now) -> None:
    make_job(tenant, now=now - timedelta(minutes=5))
    make_job(tenant, now=now - timedelta(minutes=1))
    make_job(tenant, status=JobStatus.RUNNING, claimed_until=now + timedelta(seconds=30))
    make_job(tenant, status=JobStatus.RUNNING, claimed_until=now - timedelta(seconds=1))
    make_job(tenant, status=JobStatus.DEAD_LETTERED)
    make_job(tenant, status=JobStatus.COMPLETED)
    make_notification(tenant, next_fire_at=now - timedelta(seconds=90))
    make_notification(tenant, next_fire_at=now - timedelta(seconds=10))
    make_notification(
        tenant,
        next_fire_at=now + timedelta(minutes=5),
        due_at=now - timedelta(minutes=4),
        error_count=1,
    )
    make_notification(tenant, next_fire_at=None, dead_letter_reason="exhausted", error_count=3)
    make_notification(tenant, next_fire_at=now, claimed_until=now + timedelta(seconds=20))
    # Counted in no figure: a finished row, and one parked at a since lowered limit.
    make_notification(tenant, next_fire_at=None, state="completed", last_fired_at=now)
    make_notification(tenant, next_fire_at=now - timedelta(minutes=9), error_count=3)
