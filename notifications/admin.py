"""Support staff's view of the queue: find stuck notifications, read their delivery log,
retry or unpark them, switch webhook endpoints off. Signing secrets are never shown."""

from collections.abc import Callable

from django.contrib import admin, messages
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.timezone import now as utc_now

from notifications import services, webhook_endpoints
from notifications.models import Delivery, Notification, NotificationQuerySet, WebhookEndpoint
from web.admin import ReadOnlyModelAdmin

RECENT_DELIVERIES = 20


class QueueStateFilter(admin.SimpleListFilter):
    title = "queue state"
    parameter_name = "queue"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple]:
        return [
            ("due", "Due now"),
            ("backing_off", "Backing off"),
            ("dead_lettered", "Dead-lettered"),
            ("parked", "Parked"),
            ("claimed", "Claimed (in flight)"),
        ]

    def queryset(self, request: HttpRequest, queryset: NotificationQuerySet) -> QuerySet:
        now = utc_now()
        selectors: dict[str, Callable[[], QuerySet]] = {
            "due": lambda: queryset.due(now=now),
            "backing_off": queryset.backing_off,
            "dead_lettered": queryset.dead_lettered,
            "parked": queryset.parked,
            "claimed": lambda: queryset.in_flight(now=now),
        }
        select = selectors.get(self.value() or "")
        return select() if select else queryset


def _cells(delivery: Delivery) -> tuple:
    return (
        delivery.attempted_at,
        delivery.occurrence,
        delivery.channel,
        delivery.outcome,
        delivery.http_status or "",
        delivery.error_category,
        delivery.error,
    )


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "tenant",
        "channels",
        "state",
        "next_fire_at",
        "occurrence",
        "error_count",
        "last_error",
    ]
    list_filter = [QueueStateFilter, "dead_letter_reason"]
    list_select_related = ["tenant"]
    search_fields = ["id", "subject"]
    ordering = ["-created_at"]
    raw_id_fields = ["tenant", "project", "webhook_endpoint"]
    readonly_fields = [
        "id",
        "due_at",
        "claimed_until",
        "claim_token",
        "unfinished_claims",
        "source_key",
        "created_at",
        "recent_deliveries",
    ]
    actions = ["retry_now", "unpark"]

    @admin.display(description="state")
    def state(self, notification: Notification) -> str:
        return notification.state

    @admin.display(description="delivery log (latest)")
    def recent_deliveries(self, notification: Notification) -> str:
        deliveries = Delivery.objects.filter(
            tenant_id=notification.tenant_id, notification_id=notification.id
        ).order_by("-attempted_at", "-id")[:RECENT_DELIVERIES]
        rows = format_html_join("", "<tr>" + "<td>{}</td>" * 7 + "</tr>", map(_cells, deliveries))
        link = (
            reverse("admin:notifications_delivery_changelist")
            + "?"
            + urlencode({"notification_id": notification.id})
        )
        return format_html(
            "<table><tr><th>attempted</th><th>occurrence</th><th>channel</th><th>outcome</th>"
            "<th>HTTP</th><th>category</th><th>error</th></tr>{}</table>"
            '<p><a href="{}">Full delivery log</a></p>',
            rows,
            link,
        )

    @admin.action(description="Retry now")
    def retry_now(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._each(request, queryset, services.notification_retry, "retried")

    @admin.action(description="Unpark")
    def unpark(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._each(request, queryset, services.notification_unpark, "unparked")

    def _each(self, request: HttpRequest, queryset: QuerySet, action: Callable, done: str) -> None:
        changed, skipped = 0, []
        for notification in queryset.select_related("tenant"):
            try:
                action(tenant=notification.tenant, notification_id=notification.id)
                changed += 1
            except services.NotificationClaimed:
                skipped.append(f"{notification.id} (being delivered)")
            except services.NotificationNotParked:
                skipped.append(f"{notification.id} (not parked)")
            except services.ScheduleFinished:
                skipped.append(f"{notification.id} (schedule finished)")
            except Notification.DoesNotExist:
                skipped.append(f"{notification.id} (deleted)")
        self.message_user(request, f"{changed} notification(s) {done}.", messages.SUCCESS)
        if skipped:
            self.message_user(request, "Skipped: " + ", ".join(skipped), messages.WARNING)


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    list_display = ["url", "tenant", "enabled", "disabled_reason", "created_at"]
    list_filter = ["enabled"]
    list_select_related = ["tenant"]
    search_fields = ["url"]
    ordering = ["-created_at"]
    # The secrets are excluded from every form and page; rotation happens through the API.
    exclude = ["secret", "previous_secret", "previous_secret_expires_at"]
    raw_id_fields = ["tenant"]
    readonly_fields = ["id", "created_at"]
    actions = ["enable", "disable"]
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    @admin.action(description="Enable")
    def enable(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._switch(request, queryset, enabled=True)

    @admin.action(description="Disable")
    def disable(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._switch(request, queryset, enabled=False)

    def _switch(self, request: HttpRequest, queryset: QuerySet, *, enabled: bool) -> None:
        for endpoint in queryset.select_related("tenant"):
            webhook_endpoints.webhook_endpoint_update(
                tenant=endpoint.tenant,
                endpoint_id=endpoint.id,
                enabled=enabled,
                disabled_reason="disabled by support",
            )
        state = "enabled" if enabled else "disabled"
        self.message_user(request, f"{queryset.count()} endpoint(s) {state}.", messages.SUCCESS)


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyModelAdmin):
    list_display = [
        "attempted_at",
        "notification_id",
        "tenant",
        "occurrence",
        "channel",
        "outcome",
        "http_status",
        "error_category",
        "duration_ms",
        "late_ms",
        "skipped_count",
    ]
    list_filter = ["outcome", "channel", "error_category"]
    list_select_related = ["tenant"]
    # A notification's change page links here with ?notification_id=<id> (a plain field
    # lookup: Delivery has no foreign key to the notification on purpose).
    search_fields = ["=notification_id"]
    ordering = ["-attempted_at"]
