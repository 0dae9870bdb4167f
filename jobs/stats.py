"""Queue figures of the jobs outbox for `queue_status` (read-only)."""

from datetime import datetime

from django.db.models import Count, Min, Q

from dbqueue.leases import lease_running
from jobs.models import Job, JobStatus


def job_queue_stats(*, now: datetime) -> dict[str, int]:
    """{pending, in_flight, dead_lettered, oldest_pending_age_seconds} in one query.

    `in_flight` counts running jobs whose lease is still running (an expired lease is
    orphaned work, counted by neither). The oldest pending age is measured from the job's
    creation, in whole seconds; 0 when nothing is pending.
    """
    figures = Job.objects.aggregate(
        pending=Count("pk", filter=Q(status=JobStatus.PENDING)),
        in_flight=Count("pk", filter=Q(status=JobStatus.RUNNING) & lease_running(now=now)),
        dead_lettered=Count("pk", filter=Q(status=JobStatus.DEAD_LETTERED)),
        oldest_pending=Min("created_at", filter=Q(status=JobStatus.PENDING)),
    )
    oldest = figures.pop("oldest_pending")
    figures["oldest_pending_age_seconds"] = _age_seconds(oldest, now=now)
    return figures


def _age_seconds(moment: datetime | None, *, now: datetime) -> int:
    if moment is None:
        return 0
    return max(0, int((now - moment).total_seconds()))
