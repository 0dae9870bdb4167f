"""Admin for projects (with their jobs, read-only)."""

from django.contrib import admin
from django.http import HttpRequest

from jobs.models import Job
from projects.models import Project

_JOB_FIELDS = (
    "id",
    "kind",
    "status",
    "attempts",
    "max_attempts",
    "next_attempt_at",
    "last_error_category",
    "last_error",
    "created_at",
    "completed_at",
)


class JobInline(admin.TabularInline):
    """The project's jobs as they are; retrying is done from the jobs admin."""

    model = Job
    extra = 0
    fields = _JOB_FIELDS
    readonly_fields = _JOB_FIELDS
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Project | None = None) -> bool:
        return False


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    """Projects are created through the API's service, which writes the idempotency key,
    the project and its provision job together, so there is no "add" here; the status
    moves only with its job (a retry from the jobs admin), never by hand."""

    list_display = ["name", "tenant", "status", "created_by", "created_at"]
    list_filter = ["status"]
    search_fields = ["name", "id", "tenant__name"]
    list_select_related = ["tenant", "created_by"]
    readonly_fields = ["id", "tenant", "status", "created_by", "created_at", "updated_at"]
    inlines = [JobInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
