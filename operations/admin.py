"""Adds the "Queue health" page to the default admin site, staff only, linked from the
admin index."""

from collections.abc import Callable

from django.contrib import admin
from django.urls import URLPattern, URLResolver, path

from operations.admin_views import queue_health_view


def _with_queue_health(
    get_urls: Callable[[], list[URLPattern | URLResolver]],
) -> Callable[[], list[URLPattern | URLResolver]]:
    def get_urls_with_queue_health() -> list[URLPattern | URLResolver]:
        page = path("queue-health/", admin.site.admin_view(queue_health_view), name="queue_health")
        return [page, *get_urls()]

    return get_urls_with_queue_health


# The default site keeps serving every app's admin; only its URL list gains the page.
admin.site.get_urls = _with_queue_health(admin.site.get_urls)  # type: ignore[method-assign]
admin.site.index_template = "admin/operations/index.html"
