"""The jobs outbox: written with the project in one transaction, claimed by consume_jobs."""

import uuid
from datetime import datetime

from django.db import models
from django.utils import timezone

from dbqueue.leases import lease_free
from jobs.states import CLAIMABLE, JobStatus
from outbound.categories import ERROR_CATEGORY_CHOICES
from tenancy.models import Tenant

__all__ = ["Job", "JobStatus"]

# The queue of every job that names none (Django's DEFAULT_TASK_QUEUE_NAME).
DEFAULT_QUEUE = "default"

# The kind of every Django task's job (`jobs.tasks`); its payload names the task.
TASK_KIND = "task"

# How many attempts `attempt_history` keeps (the newest).
HISTORY_LENGTH = 20


class JobQuerySet(models.QuerySet["Job"]):
    def claimable(self) -> "JobQuerySet":
        """The jobs a ready job is always among, now or later (the ready indexes' condition)."""
        return self.filter(status__in=CLAIMABLE)

    def ready(self, *, now: datetime) -> "JobQuerySet":
        """Claimable now: pending and due, or running with an expired lease (orphaned)."""
        return self.filter(status__in=CLAIMABLE, next_attempt_at__lte=now).filter(
            lease_free(now=now)
        )


class Job(models.Model):
    """One unit of background work.

    While `running`, `next_attempt_at` equals the lease expiry, so one partial index on
    `next_attempt_at` serves both due pending jobs and orphaned running ones. A completed or
    dead-lettered job has no next attempt: the column is NULL (a retry sets it again).
    The statuses and the moves between them are `jobs.states`'.

    `attempt_history` keeps the newest HISTORY_LENGTH attempts that wrote an outcome, oldest
    first: `{at, outcome, error_category, error}` each, written by the statement that records
    the outcome (no statement of its own).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index of its own: job_tenant_status_idx leads with the tenant, and every index is
    # written again by each claim and completion (status changes, so no update is HOT).
    # NULL for a Django task (`jobs.tasks`): the application's work, no tenant's.
    tenant = models.ForeignKey(
        Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="jobs", db_index=False
    )
    # By name, not import: jobs sits below projects and knows no project behaviour. NULL for
    # a job that is no project's (a webhook endpoint's recovery).
    project = models.ForeignKey(
        "projects.Project", null=True, blank=True, on_delete=models.CASCADE, related_name="jobs"
    )
    kind = models.CharField(max_length=50)
    payload = models.JSONField(default=dict, blank=True)
    # What `consume_jobs --queue NAME` runs, and the claim order among ready jobs (higher
    # first): a Django task's `queue_name` and `priority`; every other job keeps the defaults.
    # Defaults in the table too, for rows written by SQL of its own.
    queue_name = models.CharField(max_length=100, default=DEFAULT_QUEUE, db_default=DEFAULT_QUEUE)
    priority = models.SmallIntegerField(default=0, db_default=0)
    # What a completed Django task returned (JSON); NULL for every other job.
    return_value = models.JSONField(null=True, blank=True, default=None)
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField()
    next_attempt_at = models.DateTimeField(default=timezone.now, null=True, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    claim_token = models.BigIntegerField(default=0)
    last_error_category = models.CharField(
        max_length=32, choices=ERROR_CATEGORY_CHOICES, blank=True, default=""
    )
    last_error = models.CharField(max_length=500, blank=True, default="")
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    attempt_history = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                condition=models.Q(status__in=["pending", "running"]),
                name="job_ready_idx",
            ),
            # PostgreSQL's claim walks it (ClaimSpec.groups): from one tenant with claimable
            # jobs to the next (Django tasks, with none, first), taking each one's first
            # ready jobs in claim order. Made on PostgreSQL only (migration 0015): SQLite's
            # planner would scan it whole.
            models.Index(
                fields=["tenant", "-priority", "next_attempt_at", "id"],
                condition=models.Q(status__in=["pending", "running"]),
                name="job_tenant_ready_idx",
            ),
            models.Index(fields=["tenant", "status", "-created_at"], name="job_tenant_status_idx"),
            # For the prune only; partial, so only a completion writes to it.
            models.Index(
                fields=["completed_at"],
                condition=models.Q(status="completed"),
                name="job_completed_idx",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=JobStatus.values), name="job_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.id} ({self.status})"

    @property
    def tenant_pk(self) -> uuid.UUID:
        """The id of the job's tenant, for the handlers of tenants' jobs: every job has one
        but a Django task's, which belongs to no tenant (ValueError)."""
        if self.tenant_id is None:
            raise ValueError(f"job {self.id} belongs to no tenant")
        return self.tenant_id
