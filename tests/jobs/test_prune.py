"""prune: completed jobs and delivery-log rows past retention, expired operation keys."""

import io
import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from jobs.models import Job, JobStatus
from notifications.models import Delivery
from projects.models import OperationKey
from tests.jobs.factories import make_job


def seed(tenant, *, now) -> dict[str, object]:
    old, recent = now - timedelta(days=31), now - timedelta(days=29)
    rows = {
        "old_done": make_job(tenant, status=JobStatus.COMPLETED, completed_at=old),
        "recent_done": make_job(tenant, status=JobStatus.COMPLETED, completed_at=recent),
        "old_failed": make_job(tenant, status=JobStatus.FAILED, updated_at=old),
        "old_pending": make_job(tenant, now=old),
    }
    for attempted_at in (old, old, recent):
        Delivery.objects.create(
            notification_id=rows["old_done"].id,
            tenant=tenant,
            occurrence=1,
            channel="email",
            outcome="delivered",
            attempted_at=attempted_at,
        )
    for key, expires_at in (
        ("gone", now - timedelta(seconds=1)),
        ("kept", now + timedelta(hours=1)),
    ):
        OperationKey.objects.create(
            tenant=tenant,
            key=key,
            fingerprint="f",
            response_status=202,
            response_body={},
            expires_at=expires_at,
        )
    return rows


def test_prune_deletes_what_is_past_retention_and_prints_counts(alice, settings):
    settings.RETENTION_DAYS = 30
    rows = seed(alice.tenant, now=timezone.now())
    out = io.StringIO()

    call_command("prune", "--json", stdout=out)

    assert json.loads(out.getvalue()) == {"jobs": 1, "deliveries": 2, "operation_keys": 1}
    remaining = set(Job.objects.values_list("pk", flat=True))
    assert rows["old_done"].pk not in remaining
    assert {rows["recent_done"].pk, rows["old_failed"].pk, rows["old_pending"].pk} <= remaining
    assert Delivery.objects.count() == 1
    assert list(OperationKey.objects.values_list("key", flat=True)) == ["kept"]


def test_days_overrides_the_retention_setting(alice):
    seed(alice.tenant, now=timezone.now())
    out = io.StringIO()

    call_command("prune", "--days", "7", stdout=out)

    assert out.getvalue().strip() == (
        "prune: jobs=2 deliveries=3 operation_keys=1 (older than 7 days)"
    )


def test_negative_days_are_refused(db):
    with pytest.raises(CommandError, match="--days"):
        call_command("prune", "--days", "-1")
