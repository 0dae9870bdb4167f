"""consume_jobs --once: one bounded pass, one summary line, exit 0; flags are checked."""

import io
import re
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from jobs.consumer import jobs_worker
from jobs.models import Job, JobStatus
from tests.jobs.factories import make_job
from tests.support.processes import fail_with, session_ended


@pytest.fixture(autouse=True)
def _settings(settings):
    settings.PROVISIONING_URL = ""


def test_once_drains_the_ready_jobs_and_prints_one_summary_line(alice):
    for _ in range(3):
        make_job(alice.tenant, now=timezone.now())
    out = io.StringIO()

    call_command("consume_jobs", "--once", stdout=out)

    [line] = out.getvalue().splitlines()
    assert line.startswith(
        "event=consume_jobs claimed=3 completed=3 backed_off=0 deferred=0 dead_lettered=0 "
        "fenced_out=0 duration_s="
    )
    assert re.fullmatch(r".* duration_s=\d+\.\d{3}", line)
    assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.COMPLETED}


def test_once_respects_the_limit(alice):
    for _ in range(3):
        make_job(alice.tenant, now=timezone.now())
    out = io.StringIO()

    call_command("consume_jobs", "--once", "--limit", "2", stdout=out)

    assert "claimed=2 completed=2" in out.getvalue()
    assert Job.objects.filter(status=JobStatus.PENDING).count() == 1


# Committed: the loop drops its connection between passes, as it does between requests.
@pytest.mark.django_db(transaction=True)
def test_each_pass_of_the_loop_respects_the_limit(alice):
    for _ in range(3):
        make_job(alice.tenant, now=timezone.now())
    lines: list[str] = []

    def report(line: str) -> None:
        lines.append(line)
        worker.stop()  # after the first pass

    worker = jobs_worker(
        limit=2, max_seconds=50, interval=1, report=report, report_error=lines.append
    )
    worker.run(loop=True)

    [line] = lines
    assert "claimed=2 completed=2" in line
    assert Job.objects.filter(status=JobStatus.PENDING).count() == 1


def test_once_with_nothing_ready_reports_zeros(db):
    out = io.StringIO()

    call_command("consume_jobs", "--once", stdout=out)

    assert out.getvalue().startswith("event=consume_jobs claimed=0 completed=0")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--once", "--loop"), "not allowed with argument"),
        (("--once", "--limit", "0"), "--limit"),
        (("--once", "--max-seconds", "-1"), "--max-seconds"),
        (("--loop", "--interval", "0"), "--interval"),
        (("--loop", "--interval", "-2"), "--interval"),
    ],
)
def test_bad_flags_are_refused_with_a_clear_message(db, flags, message):
    with pytest.raises(CommandError, match=message):
        call_command("consume_jobs", *flags)


def test_once_stops_on_a_lost_database_with_one_error_line_and_leaves_the_batch_claimed(
    alice, monkeypatch
):
    jobs = [make_job(alice.tenant, now=timezone.now() - timedelta(minutes=1)) for _ in range(2)]
    make_job(alice.tenant, now=timezone.now() + timedelta(minutes=1))
    monkeypatch.setattr("jobs.processing.jobs_complete", fail_with(session_ended()))
    out = io.StringIO()

    with pytest.raises(CommandError) as raised:
        call_command("consume_jobs", "--once", stdout=out)

    assert str(raised.value) == (
        "consume_jobs: cannot reach the database "
        "(terminating connection due to administrator command)"
    )
    # No failure recorded for the batch's jobs (the database failed, not the jobs): they
    # stay claimed and are reclaimed when their lease expires. Nothing else was claimed.
    for job in jobs:
        job.refresh_from_db()
        assert (job.status, job.attempts, job.last_error) == (JobStatus.RUNNING, 1, "")
        assert job.claimed_until > timezone.now()
    assert Job.objects.filter(status=JobStatus.PENDING).count() == 1
