"""Applications, messages and event types in the admin, read-only (an application is
deleted through the API, which disables its endpoints): a message's page shows its
deliveries per endpoint (webhooks.messages.message_attempts), each linked to its delivery
row."""

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from delivery.models import Notification
from web.admin import ReadOnlyModelAdmin
from webhooks.messages import message_attempts
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
    )

    @admin.display(description="endpoints")
    def endpoint_count(self, message: Message) -> int:
        return len(message.endpoint_ids)

    @admin.display(description="deliveries per endpoint")
    def deliveries_per_endpoint(self, message: Message) -> str:
        attempts = message_attempts(tenant=message.tenant, message_id=message.id)
        if not attempts:
            return "none"
        latest = {
            endpoint_id: row_id
            for row_id, endpoint_id in Notification.objects.filter(message=message)
            .order_by("created_at")
            .values_list("id", "webhook_endpoint_id")
        }
        rows = [
            (
                reverse("admin:delivery_notification_change", args=[latest[entry.endpoint_id]]),
                entry.endpoint_id,
                entry.status,
                entry.attempts,
                entry.last_outcome or "-",
                entry.last_http_status or "-",
            )
            for entry in attempts
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
