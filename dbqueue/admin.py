from django.contrib import admin

from dbqueue.models import WorkerTotal
from web.admin import ReadOnlyModelAdmin


@admin.register(WorkerTotal)
class WorkerTotalAdmin(ReadOnlyModelAdmin):
    """The workers' cumulative counters, for support staff without a Prometheus: read-only,
    since only the workers themselves may count."""

    list_display = ("worker", "name", "total", "updated_at")
    list_filter = ("worker",)
    ordering = ("worker", "name")
