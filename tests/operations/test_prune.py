"""prune: completed jobs, completed notifications and delivery-log rows past retention,
expired operation keys."""

import io
import json
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from delivery.models import Delivery, EmailBatch, Notification
from jobs.models import Job, JobStatus
from tenancy.models import ApiToken, OperationKey, SigninLink, TokenKind
from tests.delivery.factories import make_notification
from tests.jobs.factories import make_job

ROOT = Path(__file__).resolve().parents[2]


def seed(tenant, *, now) -> dict[str, Job | Notification | EmailBatch]:
    old, recent = now - timedelta(days=31), now - timedelta(days=29)
    rows: dict[str, Job | Notification | EmailBatch] = {
        "old_done": make_job(tenant, status=JobStatus.COMPLETED, completed_at=old),
        "recent_done": make_job(tenant, status=JobStatus.COMPLETED, completed_at=recent),
        "old_failed": make_job(tenant, status=JobStatus.DEAD_LETTERED, updated_at=old),
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
            resource="/v1/projects/x",
            response_status=202,
            response_body=b"{}",
            expires_at=expires_at,
        )
    for name, fired_at in (("old_completed", old), ("recent_completed", recent)):
        rows[name] = make_notification(
            tenant=tenant, next_fire_at=None, state="completed", last_fired_at=fired_at
        )
    rows["old_dead_lettered"] = make_notification(
        tenant=tenant, next_fire_at=None, dead_letter_reason="exhausted", updated_at=old
    )
    old_batch = EmailBatch.objects.create(body="[]", members=[], created_at=now - timedelta(days=3))
    EmailBatch.objects.create(body="[]", members=[], created_at=now - timedelta(days=1))
    rows["old_batch"] = old_batch
    return rows


def test_prune_deletes_what_is_past_retention_and_prints_counts(alice, settings):
    settings.RETENTION_DAYS = 30
    rows = seed(alice.tenant, now=timezone.now())
    out = io.StringIO()

    call_command("prune", "--json", stdout=out)

    assert json.loads(out.getvalue()) == {
        "jobs": 1,
        "notifications": 1,
        "deliveries": 2,
        "operation_keys": 1,
        "email_batches": 1,
        "sessions": 0,
        "signin_links": 0,
    }
    assert set(Notification.objects.values_list("pk", flat=True)) == {
        rows["recent_completed"].pk,
        rows["old_dead_lettered"].pk,
    }
    assert not EmailBatch.objects.filter(pk=rows["old_batch"].pk).exists()
    assert EmailBatch.objects.count() == 1
    remaining = set(Job.objects.values_list("pk", flat=True))
    assert rows["old_done"].pk not in remaining
    assert {rows["recent_done"].pk, rows["old_failed"].pk, rows["old_pending"].pk} <= remaining
    assert Delivery.objects.count() == 1
    assert list(OperationKey.objects.values_list("key", flat=True)) == ["kept"]


def test_days_overrides_the_retention_settings_and_prints_one_logfmt_line(alice):
    seed(alice.tenant, now=timezone.now())
    out = io.StringIO()

    call_command("prune", "--days", "7", stdout=out)

    assert re.fullmatch(
        r"event=prune jobs=2 notifications=2 deliveries=3 operation_keys=1 email_batches=1 "
        r"sessions=0 signin_links=0 "
        r"jobs_days=7 "
        r"deliveries_days=7 "
        r"duration_s=\d+\.\d{3}",
        out.getvalue().strip(),
    )


def test_each_table_has_its_own_age(alice, settings):
    settings.JOB_RETENTION_DAYS = 7
    settings.DELIVERY_RETENTION_DAYS = 60
    seed(alice.tenant, now=timezone.now())
    out = io.StringIO()

    call_command("prune", "--json", stdout=out)

    assert json.loads(out.getvalue()) == {
        "jobs": 2,
        "notifications": 0,
        "deliveries": 0,
        "operation_keys": 1,
        "email_batches": 1,
        "sessions": 0,
        "signin_links": 0,
    }

    call_command("prune", "--json", "--deliveries-days", "30", stdout=(out := io.StringIO()))

    assert json.loads(out.getvalue()) == {
        "jobs": 0,
        "notifications": 1,
        "deliveries": 2,
        "operation_keys": 0,
        "email_batches": 0,
        "sessions": 0,
        "signin_links": 0,
    }


def test_rows_go_in_bounded_batches_each_its_own_short_delete(alice):
    old = timezone.now() - timedelta(days=40)
    for _ in range(5):
        make_job(alice.tenant, status=JobStatus.COMPLETED, completed_at=old)

    with CaptureQueriesContext(connection) as queries:
        call_command("prune", "--json", "--batch-size", "2", stdout=(out := io.StringIO()))

    assert json.loads(out.getvalue())["jobs"] == 5
    job_deletes = [
        query["sql"]
        for query in queries.captured_queries
        if query["sql"].startswith('DELETE FROM "jobs_job"')
    ]
    assert len(job_deletes) == 3  # 2 + 2 + 1
    assert not Job.objects.exists()


def test_live_rows_are_never_pruned_whatever_their_age(alice):
    ancient = timezone.now() - timedelta(days=3650)
    kept = [
        make_job(alice.tenant, now=ancient),
        make_job(alice.tenant, status=JobStatus.RUNNING, now=ancient, claim_token=1),
        make_job(alice.tenant, status=JobStatus.DEAD_LETTERED, now=ancient, updated_at=ancient),
    ]
    notifications = [
        make_notification(tenant=alice.tenant, next_fire_at=ancient),
        make_notification(tenant=alice.tenant, next_fire_at=ancient, error_count=1),
        make_notification(tenant=alice.tenant, next_fire_at=None, dead_letter_reason="exhausted"),
        make_notification(tenant=alice.tenant, next_fire_at=None, last_fired_at=ancient),
    ]

    call_command("prune", "--days", "0", "--yes", stdout=io.StringIO())

    assert set(Job.objects.values_list("pk", flat=True)) == {job.pk for job in kept}
    assert set(Notification.objects.values_list("state", flat=True)) == {
        "scheduled",
        "backing_off",
        "dead_lettered",
        "parked",
    }
    assert Notification.objects.count() == len(notifications)


@pytest.mark.parametrize(
    "arguments",
    [["--days", "-1"], ["--jobs-days", "-1"], ["--deliveries-days", "-2"], ["--batch-size", "0"]],
)
def test_bad_arguments_are_refused(db, arguments):
    with pytest.raises(CommandError, match=arguments[0]):
        call_command("prune", *arguments)


def table_sizes() -> dict[str, int]:
    return {
        "jobs": Job.objects.count(),
        "notifications": Notification.objects.count(),
        "deliveries": Delivery.objects.count(),
        "operation_keys": OperationKey.objects.count(),
        "email_batches": EmailBatch.objects.count(),
        "sessions": 0,
        "signin_links": 0,
    }


def test_a_dry_run_prints_what_would_go_per_table_and_deletes_nothing(alice, settings):
    settings.JOB_RETENTION_DAYS = settings.DELIVERY_RETENTION_DAYS = 30
    seed(alice.tenant, now=timezone.now())
    before = table_sizes()

    call_command("prune", "--dry-run", "--json", stdout=(out := io.StringIO()))

    assert json.loads(out.getvalue()) == {
        "dry_run": True,
        "jobs": 1,
        "notifications": 1,
        "deliveries": 2,
        "operation_keys": 1,
        "email_batches": 1,
        "sessions": 0,
        "signin_links": 0,
    }
    assert table_sizes() == before

    call_command("prune", "--dry-run", "--days", "7", stdout=(out := io.StringIO()))

    assert re.fullmatch(
        r"event=prune_dry_run jobs=2 notifications=2 deliveries=3 operation_keys=1 "
        r"email_batches=1 sessions=0 signin_links=0 "
        r"jobs_days=7 deliveries_days=7 duration_s=\d+\.\d{3}",
        out.getvalue().strip(),
    )
    assert table_sizes() == before
    call_command("prune", "--json", "--days", "7", stdout=(out := io.StringIO()))
    counts = json.loads(out.getvalue())
    # What the dry run announced.
    assert (counts["notifications"], counts["deliveries"]) == (2, 3)


@pytest.mark.parametrize(
    ("arguments", "source"),
    [
        (
            ["--days", "0"],
            "every completed job (--days 0) and the whole delivery log and every completed "
            "notification (--days 0)",
        ),
        (["--jobs-days", "0"], "every completed job (--jobs-days 0):"),
        (
            ["--deliveries-days", "0"],
            "the whole delivery log and every completed notification (--deliveries-days 0):",
        ),
    ],
)
def test_a_retention_of_0_days_is_refused_without_yes(alice, arguments, source):
    seed(alice.tenant, now=timezone.now())
    before = table_sizes()

    with pytest.raises(CommandError, match="--dry-run") as refused:
        call_command("prune", *arguments)

    assert f"a retention of 0 days deletes {source}" in str(refused.value)
    assert table_sizes() == before


def test_a_retention_of_0_days_from_the_settings_is_refused_too(alice, settings):
    settings.JOB_RETENTION_DAYS = 0
    settings.DELIVERY_RETENTION_DAYS = 30
    seed(alice.tenant, now=timezone.now())
    before = table_sizes()

    with pytest.raises(CommandError, match=r"every completed job \(JOB_RETENTION_DAYS=0\):"):
        call_command("prune")

    assert table_sizes() == before
    call_command("prune", "--dry-run", "--json", stdout=(out := io.StringIO()))
    assert json.loads(out.getvalue())["jobs"] == 2
    assert table_sizes() == before


def test_yes_confirms_a_retention_of_0_days(alice):
    seed(alice.tenant, now=timezone.now())

    call_command("prune", "--days", "0", "--yes", "--json", stdout=(out := io.StringIO()))

    assert json.loads(out.getvalue()) == {
        "jobs": 2,
        "notifications": 2,
        "deliveries": 3,
        "operation_keys": 1,
        "email_batches": 1,
        "sessions": 0,
        "signin_links": 0,
    }
    assert not Job.objects.filter(status=JobStatus.COMPLETED).exists()
    assert not Notification.objects.filter(state="completed").exists()
    assert not Delivery.objects.exists()


def test_the_refusal_is_one_error_line_and_a_failing_exit_status():
    env = {key: value for key, value in os.environ.items() if "RETENTION_DAYS" not in key}
    env |= {"DEBUG": "true", "DATABASE_URL": "sqlite:///:memory:", "RETENTION_DAYS": "0"}

    result = subprocess.run(
        [sys.executable, "manage.py", "prune"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 1
    assert result.stderr == (
        "CommandError: a retention of 0 days deletes every completed job "
        "(JOB_RETENTION_DAYS=0) and the whole delivery log and every completed notification "
        "(DELIVERY_RETENTION_DAYS=0): "
        "see the counts with --dry-run, then run again with --yes to delete them.\n"
    )


def test_ended_sessions_and_signin_links_go_and_api_tokens_stay(alice):
    now = timezone.now()
    long_ago, moments_ago = now - timedelta(days=8), now - timedelta(minutes=1)
    ended = ApiToken.issue(user=alice.user, name="old session")[0]
    revoked = ApiToken.issue(user=alice.user, name="signed out")[0]
    live = ApiToken.issue(user=alice.user, name="live session")[0]
    just_ended = ApiToken.issue(user=alice.user, name="just ended")[0]
    old_api = ApiToken.issue(user=alice.user, name="expired API token")[0]
    ApiToken.objects.filter(pk=ended.pk).update(kind=TokenKind.SESSION, expires_at=long_ago)
    ApiToken.objects.filter(pk=revoked.pk).update(
        kind=TokenKind.SESSION, expires_at=now + timedelta(days=1), revoked_at=long_ago
    )
    ApiToken.objects.filter(pk=live.pk).update(kind=TokenKind.SESSION, expires_at=now)
    ApiToken.objects.filter(pk=just_ended.pk).update(kind=TokenKind.SESSION, expires_at=moments_ago)
    ApiToken.objects.filter(pk=old_api.pk).update(expires_at=long_ago)
    SigninLink.objects.create(
        user=alice.user, token_digest="a" * 64, expires_at=long_ago, created_at=long_ago
    )
    # Ended, but the sign-in resend spacing still counts it (the day's links).
    counted = SigninLink.objects.create(
        user=alice.user, token_digest="c" * 64, expires_at=moments_ago, created_at=moments_ago
    )
    pending = SigninLink.objects.create(
        user=alice.user, token_digest="b" * 64, expires_at=now + timedelta(minutes=10)
    )

    call_command("prune", "--json", stdout=(out := io.StringIO()))

    counts = json.loads(out.getvalue())
    assert (counts["sessions"], counts["signin_links"]) == (2, 1)
    remaining = set(ApiToken.objects.values_list("pk", flat=True))
    assert {ended.pk, revoked.pk} & remaining == set()
    assert {live.pk, just_ended.pk, old_api.pk} <= remaining
    assert set(SigninLink.objects.values_list("pk", flat=True)) == {counted.pk, pending.pk}
