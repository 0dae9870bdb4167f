"""Support staff's view of the jobs outbox: find failed jobs (dead letters), see why they
failed, retry them once the cause is fixed. Claim columns are read-only: only a consumer's
claim may change them."""

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from jobs.models import Job, JobStatus
from jobs.services import JobNotRetryable, job_retry


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "tenant",
        "project",
        "kind",
        "status",
        "attempts_of_max",
        "next_attempt_at",
        "last_error_category",
        "last_attempt_at",
    )
    list_filter = ("status", "last_error_category", "kind")
    list_select_related = ("tenant", "project")
    search_fields = ("=id", "=project__id")
    ordering = ("-created_at",)
    date_hierarchy = "created_at"
    readonly_fields = (
        "id",
        "tenant",
        "project",
        "kind",
        "claimed_until",
        "claim_token",
        "attempts",
        "last_attempt_at",
        "created_at",
        "updated_at",
        "completed_at",
    )
    actions = ("retry",)

    @admin.display(description="attempts")
    def attempts_of_max(self, job: Job) -> str:
        return f"{job.attempts}/{job.max_attempts}"

    @admin.action(description="Retry selected failed jobs")
    def retry(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        now = timezone.now()
        retried = skipped = 0
        for job in queryset.select_related("tenant"):
            try:
                job_retry(tenant=job.tenant, job_id=job.pk, now=now)
                retried += 1
            except (JobNotRetryable, Job.DoesNotExist):
                skipped += 1
        if retried:
            self.message_user(request, f"{retried} job(s) will run again.", messages.SUCCESS)
        if skipped:
            self.message_user(
                request,
                f"{skipped} job(s) skipped: only {JobStatus.FAILED} jobs can be retried.",
                messages.WARNING,
            )
