"""Applications, messages and event types in the admin, read-only (an application is
deleted through the API, which disables its endpoints): a message's page shows its
deliveries per endpoint, each linked to its delivery row (read-only there too), and its
latest attempts with why each failed one failed."""

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from web.admin import ReadOnlyModelAdmin
from webhooks.messages import message_attempt_pages, message_endpoint_deliveries
from webhooks.models import Application, EventType, Message


class AddressedFilter(admin.SimpleListFilter):
    """Rows of an application, or the tenant's own (of none)."""

    title = "addressed to"
    parameter_name = "addressed"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        return [("application", "an application"), ("own", "the tenant's own")]

    def queryset(self, request: Any, queryset: QuerySet) -> QuerySet:
        field = "application_id__isnull"
        if self.value() == "application":
            return queryset.filter(**{field: False})
        if self.value() == "own":
            return queryset.filter(**{field: True})
        return queryset


@admin.register(Application)
class ApplicationAdmin(ReadOnlyModelAdmin):
    list_display = ["uid", "name", "tenant", "created_at", "deleted_at"]
    list_select_related = ["tenant"]
    search_fields = ["=uid", "=id", "tenant__name"]
    ordering = ["-created_at"]


LATEST_ATTEMPTS = 50
# Long enough to tell errors apart, short enough that the table fits a 1366-pixel window.
ERROR_CHARS = 80


@admin.register(EventType)
class EventTypeAdmin(ReadOnlyModelAdmin):
    list_display = ["name", "tenant", "product", "archived", "created_at"]
    list_filter = ["product", "archived"]
    list_select_related = ["tenant"]
    search_fields = ["name", "tenant__name"]
    ordering = ["-created_at"]


@admin.register(Message)
class MessageAdmin(ReadOnlyModelAdmin):
    list_display = [
        *("created_at", "event_type", "tenant", "application", "event_id", "endpoint_count")
    ]
    list_filter = [AddressedFilter, "event_type"]
    list_select_related = ["tenant", "application"]
    search_fields = ["=id", "event_id", "tenant__name", "=application__uid"]
    ordering = ["-created_at"]
    fields = readonly_fields = (
        "id",
        "tenant",
        "application",
        "event_type",
        "event_id",
        "created_at",
        "payload",
        "deliveries_per_endpoint",
        "latest_attempts",
    )

    @admin.display(description="endpoints")
    def endpoint_count(self, message: Message) -> int:
        return len(message.endpoint_ids)

    @admin.display(description="deliveries per endpoint")
    def deliveries_per_endpoint(self, message: Message) -> str:
        deliveries = message_endpoint_deliveries(tenant=message.tenant, message_id=message.id)
        if not deliveries:
            return "none"
        rows = [
            (
                reverse("admin:delivery_notification_change", args=[entry.notification_id]),
                entry.endpoint_id,
                entry.status,
                entry.attempts,
                entry.last_outcome or "-",
                entry.last_http_status or "-",
            )
            for entry in deliveries
        ]
        return format_html(
            "<table><tr><th>endpoint</th><th>status</th><th>attempts</th><th>last outcome</th>"
            "<th>HTTP</th></tr>{}</table>",
            format_html_join(
                "",
                '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>',
                rows,
            ),
        )

    @admin.display(description="attempts (latest)")
    def latest_attempts(self, message: Message) -> str:
        attempts = message_attempt_pages(tenant=message.tenant, message_id=message.id)
        latest = attempts.order_by("-created_at", "-id")[:LATEST_ATTEMPTS]
        if not latest:
            return "none"
        rows = [
            (
                attempt.created_at,
                attempt.endpoint_id or "-",
                attempt.attempt or "-",
                attempt.outcome,
                attempt.http_status or "-",
                attempt.error_category or "-",
                Truncator(attempt.error).chars(ERROR_CHARS),
            )
            for attempt in latest
        ]
        return format_html(
            "<table><tr><th>at</th><th>endpoint</th><th>attempt</th><th>outcome</th>"
            "<th>HTTP</th><th>category</th><th>error</th></tr>{}</table>",
            format_html_join("", "<tr>" + "<td>{}</td>" * 7 + "</tr>", rows),
        )
