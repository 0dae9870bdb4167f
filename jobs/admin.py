"""Support staff's view of the jobs outbox: find dead-lettered jobs, see why they
failed, retry them once the cause is fixed. A job is never edited by hand: every column is
the queue's own, and a plain admin save would write a consumer's claim back over it. The
retry button and action go through `job_retry`, like the API. A Django task is a job of
kind `task` with no tenant: its payload names the task, and its return value is shown."""

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.text import Truncator

from jobs.models import Job
from jobs.services import JobNotRetryable, job_retry
from jobs.states import JobStatus, Move, allows
from web.admin import StateButtonsAdmin, pretty_json

ERROR_CHARS = 60
_FIELDS = (
    "id",
    "tenant",
    "project_link",
    "kind",
    "payload_json",
    "queue_name",
    "priority",
    "status",
    "attempts",
    "max_attempts",
    "next_attempt_at",
    "claimed_until",
    "claim_token",
    "last_error_category",
    "last_error",
    "last_attempt_at",
    "created_at",
    "updated_at",
    "completed_at",
    "return_value_json",
)


@admin.register(Job)
class JobAdmin(StateButtonsAdmin[Job]):
    change_list_template = "admin/queue_change_list.html"
    list_display = (
        "kind",
        "project_link",
        "tenant",
        "status",
        "attempts_of_max",
        "next_attempt_at",
        "last_error_category",
        "short_last_error",
        "last_attempt_at",
    )
    list_display_links = ("kind",)
    list_filter = ("status", "last_error_category", "kind", "queue_name")
    list_select_related = ("tenant", "project")
    search_fields = ("=id", "=project__id", "project__name", "tenant__name")
    ordering = ("-created_at",)
    date_hierarchy = "created_at"
    fields = _FIELDS
    readonly_fields = _FIELDS
    actions = ("retry",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_state_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Retrying is what the "change job" permission grants here; editing is never.
        return super().has_change_permission(request, obj)

    @admin.display(description="attempts")
    def attempts_of_max(self, job: Job) -> str:
        return f"{job.attempts}/{job.max_attempts}"

    @admin.display(description="project", ordering="project__name")
    def project_link(self, job: Job) -> str:
        project = job.project
        if project is None:
            return "-"
        url = reverse("admin:projects_project_change", args=[project.pk])
        return format_html('<a href="{}">{}</a>', url, project.name)

    @admin.display(description="payload")
    def payload_json(self, job: Job) -> str:
        return pretty_json(job.payload)

    @admin.display(description="return value")
    def return_value_json(self, job: Job) -> str:
        return pretty_json(job.return_value)

    @admin.display(description="last error")
    def short_last_error(self, job: Job) -> str:
        return Truncator(job.last_error).chars(ERROR_CHARS)

    def state_buttons(self, job: Job) -> list[tuple[str, str]]:
        return [("retry", "Retry")] if allows(job.status, Move.RETRY) else []

    def press_state_button(self, request: HttpRequest, job: Job, name: str) -> None:
        try:
            job_retry(tenant=job.tenant, job_id=job.pk, now=timezone.now())
        except JobNotRetryable as exc:
            self.message_user(request, str(exc), messages.WARNING)
        else:
            self.message_user(request, "The job will run again.", messages.SUCCESS)

    @admin.action(description="Retry selected dead-lettered jobs", permissions=["state_change"])
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
                f"{skipped} job(s) skipped: only {JobStatus.DEAD_LETTERED} jobs can be retried.",
                messages.WARNING,
            )
