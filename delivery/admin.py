"""The delivery log in the admin: read-only, each row linked to its notification while
that still exists (finished ones are kept as completed until pruned; the log of a deleted
or pruned one stays)."""

from typing import TYPE_CHECKING, TypeAlias, TypedDict

from django.contrib import admin
from django.db.models import Exists, OuterRef, QuerySet, Subquery
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from delivery.models import Delivery, Notification
from web.admin import ReadOnlyModelAdmin

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

# Long enough to tell errors apart, short enough that the list fits a 1366-pixel window.
ERROR_CHARS = 40


class _NotificationColumns(TypedDict):
    notification_exists: bool
    notification_subject: str | None


ListedDelivery: TypeAlias = "WithAnnotations[Delivery, _NotificationColumns]"


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyModelAdmin):
    change_list_template = "admin/queue_change_list.html"
    list_display = [
        "attempted_at",
        "notification_link",
        "tenant",
        "occurrence",
        "sent_over",
        "result",
        "short_error",
        "timing",
    ]
    list_filter = ["outcome", "channel", "error_category"]
    list_select_related = ["tenant"]
    # A notification's change page links here with ?notification_id=<id> (a plain field
    # lookup: Delivery has no foreign key to the notification on purpose).
    search_fields = ["=notification_id"]
    ordering = ["-attempted_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # Both annotations are subqueries of the list's own query: no query per row.
        notification = Notification.objects.filter(pk=OuterRef("notification_id"))
        return (
            super()
            .get_queryset(request)
            .annotate(
                notification_exists=Exists(notification),
                notification_subject=Subquery(notification.values("subject")[:1]),
            )
        )

    @admin.display(description="notification")
    def notification_link(self, delivery: ListedDelivery) -> str:
        if not delivery.notification_exists:
            return f"(deleted) {delivery.notification_id}"
        url = reverse("admin:delivery_notification_change", args=[delivery.notification_id])
        label = delivery.notification_subject or str(delivery.notification_id)
        return format_html('<a href="{}">{}</a>', url, label)

    @admin.display(description="channel", ordering="channel")
    def sent_over(self, delivery: Delivery) -> str:
        """The channel, and the recipient of an e-mail's copy: one column, so the list
        fits a 1366-pixel window."""
        return (
            f"{delivery.channel} to {delivery.recipient}"
            if delivery.recipient
            else delivery.channel
        )

    @admin.display(description="error")
    def short_error(self, delivery: Delivery) -> str:
        return Truncator(delivery.error).chars(ERROR_CHARS)

    @admin.display(description="outcome", ordering="outcome")
    def result(self, delivery: Delivery) -> str:
        """The outcome with what qualifies it: the HTTP status and error category of an
        attempt, how many occurrences a skip jumped over."""
        details = [str(delivery.http_status or ""), delivery.error_category]
        if delivery.skipped_count:
            details.append(f"{delivery.skipped_count} skipped")
        shown = ", ".join(detail for detail in details if detail)
        label = delivery.get_outcome_display()
        return f"{label} ({shown})" if shown else label

    @admin.display(description="took / late")
    def timing(self, delivery: Delivery) -> str:
        took = "-" if delivery.duration_ms is None else f"{delivery.duration_ms} ms"
        late = "-" if delivery.late_ms is None else f"{delivery.late_ms} ms"
        return f"{took} / {late}"
