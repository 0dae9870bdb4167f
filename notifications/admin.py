"""Notifications in the admin: find stuck ones, read their delivery log, retry them (now, or
a recurring one at its next occurrence), correct their content.

The queue's own columns are read-only everywhere: state changes are buttons and actions
that call the same services as the API, and a content edit is the API's guarded update,
which never writes the claim columns and refuses a row that run_tick holds right now.

A message's delivery (a row with `message_id`) is shown read-only and never deleted here: it
belongs to its message (the webhooks admin's message page lists it), and an edit, retry or
delete would re-arm it outside the message's history."""

from collections.abc import Callable
from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import mark_safe
from django.utils.text import Truncator
from django.utils.timezone import now as utc_now

from delivery import conflicts
from delivery.models import Channel, Delivery, Notification, NotificationState
from delivery.querysets import NotificationQuerySet
from delivery.states import Move, allows
from notifications import services
from web.admin import ServiceSaveAdmin, StateButtonsAdmin, pretty_json

RECENT_DELIVERIES = 20
# The admin's name for unparking: a dead-lettered or parked row is retried, a recurring one
# at its next occurrence (a one-shot is then due now).
NEXT_OCCURRENCE = "Retry at the next occurrence"
ERROR_CHARS = 60
# An endpoint's URL or an e-mail's recipients, cut short in the list.
DESTINATION_CHARS = 48
MESSAGE_DELIVERIES = "a message's deliveries (resend the message or recover the endpoint)"
CLAIMED_REFUSAL = (
    "Nothing was saved: run_tick is delivering this notification right now. "
    "Try again once its delivery has finished."
)


class QueueStateFilter(admin.SimpleListFilter):
    title = "queue state"
    parameter_name = "state"  # as the API's ?state= filter

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple]:
        # Every stored state, and two views of the queue's moment: due now, claimed now.
        return [
            ("due", "Due now"),
            *NotificationState.choices,
            ("claimed", "Claimed (in flight)"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        notifications = cast(NotificationQuerySet, queryset)  # the Notification admin's
        now = utc_now()
        value = self.value() or ""
        if value in NotificationState.values:
            return notifications.in_state(value)
        selectors: dict[str, Callable[[], QuerySet]] = {
            "due": lambda: notifications.due(now=now),
            "claimed": lambda: notifications.in_flight(now=now),
        }
        select = selectors.get(value)
        return select() if select else queryset


class AddressLinesField(forms.CharField):
    """A list of e-mail addresses edited as one address per line."""

    widget = forms.Textarea(attrs={"rows": 3})

    def prepare_value(self, value: Any) -> str:
        return "\n".join(value) if isinstance(value, list) else value

    # A CharField's widget and checks, with a list as the cleaned value.
    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        if isinstance(value, list):
            return value
        return [line.strip() for line in (value or "").splitlines() if line.strip()]


class NotificationForm(forms.ModelForm):
    channels = forms.MultipleChoiceField(
        choices=Channel.choices, widget=forms.CheckboxSelectMultiple
    )
    email_to = AddressLinesField(required=False, help_text="One address per line.")


def _cells(delivery: Delivery) -> tuple:
    return (
        delivery.attempted_at,
        delivery.occurrence,
        delivery.channel,
        delivery.recipient,
        delivery.outcome,
        delivery.http_status or "",
        delivery.error_category,
        Truncator(delivery.error).chars(ERROR_CHARS),
    )


QUEUE_STATE_FIELDS = (
    "state",
    "next_fire_at",
    "due_at",
    "channel_state",
    "occurrence",
    "last_fired_at",
    "error_count",
    "max_attempts",
    "last_error",
    "dead_letter_reason",
    "claimed_until",
    "claim_token",
    "unfinished_claims",
)


@admin.register(Notification)
class NotificationAdmin(StateButtonsAdmin[Notification], ServiceSaveAdmin):
    change_list_template = "admin/queue_change_list.html"
    form = NotificationForm
    refusals = (
        conflicts.NotificationClaimed,
        conflicts.NotificationFinished,
        services.InvalidInput,
    )
    list_display = [
        "subject_or_placeholder",
        "tenant",
        "destination",
        "state",
        "next_fire_at",
        "occurrence_and_errors",
        "short_last_error",
    ]
    list_filter = [QueueStateFilter, "dead_letter_reason"]
    # The endpoint and the message are what support looks a dead letter up by.
    list_select_related = ["tenant", "webhook_endpoint", "message"]
    search_fields = ["=id", "subject", "tenant__name"]
    ordering = ["-created_at"]
    raw_id_fields = ["webhook_endpoint"]
    fieldsets = [
        (
            "Content",
            {
                "fields": [
                    "tenant",
                    "project",
                    "subject",
                    "body",
                    "channels",
                    "email_to",
                    "webhook_endpoint",
                    "webhook_event_json",
                ]
            },
        ),
        ("Schedule", {"fields": ["rrule", "timezone", "recurrence_anchor"]}),
        (
            "Queue state (changed only by the buttons above)",
            {"fields": QUEUE_STATE_FIELDS},
        ),
        ("Record", {"fields": ["id", "message_link", "source_key", "created_at", "updated_at"]}),
        ("Delivery log", {"fields": ["recent_deliveries"]}),
    ]
    # Everything but the content a support engineer may correct: the queue's own state
    # changes only through the services behind the buttons.
    readonly_fields = [
        "tenant",
        "project",
        "webhook_event_json",
        "recurrence_anchor",
        *QUEUE_STATE_FIELDS,
        "id",
        "message_link",
        "source_key",
        "created_at",
        "updated_at",
        "recent_deliveries",
    ]
    actions = ["retry_now", "unpark"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Creating goes through the API, which validates the schedule and the channels.
        return False

    def has_change_permission(self, request: HttpRequest, obj: Notification | None = None) -> bool:
        # Without it the page is read-only and offers no buttons: a message's delivery.
        if obj is not None and obj.message_id is not None:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Notification | None = None) -> bool:
        if obj is not None and obj.message_id is not None:
            return False
        return super().has_delete_permission(request, obj)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple:
        # The list's bulk delete asks no per-row permission: a selection holding a message's
        # delivery is refused whole, as one lacking a permission is.
        deleted, counts, refused, protected = super().get_deleted_objects(objs, request)
        if any(obj.message_id is not None for obj in objs):
            refused = {*refused, MESSAGE_DELIVERIES}
        return deleted, counts, refused, protected

    @admin.display(description="message")
    def message_link(self, notification: Notification) -> str:
        if notification.message_id is None:
            return "-"
        url = reverse("admin:webhooks_message_change", args=[notification.message_id])
        return format_html('<a href="{}">{}</a>', url, notification.message_id)

    @admin.display(description="subject", ordering="subject")
    def subject_or_placeholder(self, notification: Notification) -> str:
        return notification.subject or "(no subject)"

    @admin.display(description="sent to")
    def destination(self, notification: Notification) -> str:
        """Each channel with where it goes (the endpoint's URL, the e-mail's recipients),
        and the message a delivery carries with its event_id: one column, so the list
        fits a 1366-pixel window."""
        lines = [
            f"{channel}: {Truncator(self._where(notification, channel)).chars(DESTINATION_CHARS)}"
            for channel in notification.channels
        ]
        message = notification.message
        if message is not None:
            lines.append(
                f"message {message.id}" + (f" ({message.event_id})" if message.event_id else "")
            )
        return format_html_join(mark_safe("<br>"), "{}", ((line,) for line in lines))

    @staticmethod
    def _where(notification: Notification, channel: str) -> str:
        if channel == Channel.WEBHOOK:
            endpoint = notification.webhook_endpoint
            return endpoint.url if endpoint is not None else "(endpoint deleted)"
        return ", ".join([*notification.recipients, *notification.email_to]) or "(nobody)"

    @admin.display(description="occurrence · errors")
    def occurrence_and_errors(self, notification: Notification) -> str:
        return f"{notification.occurrence} · {notification.error_count}"

    @admin.display(description="state")
    def state(self, notification: Notification) -> str:
        return notification.get_state_display()

    @admin.display(description="last error")
    def short_last_error(self, notification: Notification) -> str:
        return Truncator(notification.last_error or "").chars(ERROR_CHARS)

    @admin.display(description="custom webhook event")
    def webhook_event_json(self, notification: Notification) -> str:
        event, message = notification.webhook_event, notification.message
        if event and "data" not in event and message is not None:
            # A message's delivery sends its message's payload, stored once with the message.
            event = {**event, "data": message.payload}
        return pretty_json(event)

    @admin.display(description="delivery log (latest)")
    def recent_deliveries(self, notification: Notification) -> str:
        deliveries = Delivery.objects.filter(
            tenant_id=notification.tenant_id, notification_id=notification.id
        ).order_by("-attempted_at", "-id")[:RECENT_DELIVERIES]
        rows = format_html_join("", "<tr>" + "<td>{}</td>" * 8 + "</tr>", map(_cells, deliveries))
        link = (
            reverse("admin:delivery_delivery_changelist")
            + "?"
            + urlencode({"notification_id": str(notification.id)})
        )
        return format_html(
            "<table><tr><th>attempted</th><th>occurrence</th><th>channel</th><th>recipient</th><th>outcome</th>"
            "<th>HTTP</th><th>category</th><th>error</th></tr>{}</table>"
            '<p><a href="{}">Full delivery log</a></p>',
            rows,
            link,
        )

    def save_model(
        self, request: HttpRequest, obj: Notification, form: forms.ModelForm, change: bool
    ) -> None:
        changes = {field: form.cleaned_data[field] for field in form.changed_data}
        if "webhook_endpoint" in changes:
            endpoint = changes.pop("webhook_endpoint")
            changes["webhook_endpoint_id"] = endpoint.pk if endpoint else None
        if changes:
            services.notification_update(tenant=obj.tenant, notification_id=obj.pk, changes=changes)

    def refusal_message(self, exc: Exception) -> str:
        if isinstance(exc, conflicts.NotificationClaimed):
            return CLAIMED_REFUSAL
        return super().refusal_message(exc)

    def state_buttons(self, notification: Notification) -> list[tuple[str, str]]:
        buttons = []
        if allows(notification.state, Move.RETRY):
            buttons.append(("retry", "Retry now"))
        # For a one-shot, retrying at the next occurrence is retrying now: one button.
        if notification.is_recurring and allows(notification.state, Move.UNPARK):
            buttons.append(("unpark", NEXT_OCCURRENCE))
        return buttons

    def press_state_button(
        self, request: HttpRequest, notification: Notification, name: str
    ) -> None:
        action, done = self._state_changes()[name]
        skipped = _apply(action, notification)
        if skipped:
            self.message_user(request, f"Not {done}: {skipped}.", messages.WARNING)
        else:
            self.message_user(request, f"The notification was {done}.", messages.SUCCESS)

    @admin.action(description="Retry now", permissions=["state_change"])
    def retry_now(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._each(request, queryset, *self._state_changes()["retry"])

    @admin.action(description=NEXT_OCCURRENCE, permissions=["state_change"])
    def unpark(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._each(request, queryset, *self._state_changes()["unpark"])

    @staticmethod
    def _state_changes() -> dict[str, tuple[Callable, str]]:
        return {
            "retry": (services.notification_retry, "retried"),
            "unpark": (services.notification_unpark, "retried at its next occurrence"),
        }

    def _each(self, request: HttpRequest, queryset: QuerySet, action: Callable, done: str) -> None:
        changed, skipped = 0, []
        for notification in queryset.select_related("tenant"):
            reason = _apply(action, notification)
            if reason:
                skipped.append(f"{notification.id} ({reason})")
            else:
                changed += 1
        self.message_user(request, f"{changed} notification(s) {done}.", messages.SUCCESS)
        if skipped:
            self.message_user(request, "Skipped: " + ", ".join(skipped), messages.WARNING)


def _apply(action: Callable, notification: Notification) -> str:
    """Run a state-change service on `notification`; the reason it refused, or ""."""
    try:
        action(tenant=notification.tenant, notification_id=notification.id)
    except conflicts.NotificationClaimed:
        return "being delivered"
    except conflicts.NotificationNotParked:
        return "not dead-lettered or parked"
    except conflicts.EndpointDeleted:
        return "its webhook endpoint was deleted"
    except conflicts.NotificationHealthy:
        return "not failing"
    except conflicts.ScheduleFinished:
        return "schedule finished"
    except conflicts.MessageDelivery:
        return "a message's delivery: resend the message or recover the endpoint"
    except Notification.DoesNotExist:
        return "deleted"
    return ""
